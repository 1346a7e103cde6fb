package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// EngineSpec is the rate engine with a capacity the fleet scenarios run
// against.
type EngineSpec struct {
	Servers     int           `json:"servers"`
	ServiceTime time.Duration `json:"service_time_ns"` // the unloaded latency
	Jitter      float64       `json:"jitter"`
	Queue       int           `json:"queue"`
	// RetryAfterShare of the shed calls (503) carry Retry-After: RetryAfter.
	RetryAfterShare float64       `json:"retry_after_share"`
	RetryAfter      time.Duration `json:"retry_after_ns"`
	Capacity        float64       `json:"capacity_per_sec"` // Servers / ServiceTime
}

// capacityEngine is 8 servers of 6ms (1,333 calls a second, about the
// engine the overload of issue 12 was seen against), their service times
// spread ±25% as the demo's are, a queue of 16 (two calls per server: a
// call at the back waits two service times, so a full queue triples the
// latency), shedding with 503 past it, a fifth of them with Retry-After 1s
// (an engine that says how long to wait only sometimes).
var capacityEngine = EngineSpec{
	Servers: 8, ServiceTime: 6 * time.Millisecond, Jitter: 0.25, Queue: 16,
	RetryAfterShare: 0.2, RetryAfter: time.Second,
}

func init() {
	capacityEngine.Capacity = float64(capacityEngine.Servers) / capacityEngine.ServiceTime.Seconds()
}

// newEngine serves spec on loopback with shedding and service times drawn
// from seed.
func newEngine(ctx context.Context, spec EngineSpec, seed, salt uint64) (*simengine.Server, error) {
	eng, err := simengine.New(simengine.Options{
		Servers: spec.Servers, ServiceTime: spec.ServiceTime, Jitter: spec.Jitter, Queue: spec.Queue,
		Shedding: simengine.Shedding{RetryAfterShare: spec.RetryAfterShare, RetryAfter: spec.RetryAfter},
		Rand:     seeded(seed, salt),
	})
	if err != nil {
		return nil, err
	}
	var srv *simengine.Server
	labelled(ctx, sideDownstream, func(context.Context) { srv = simengine.NewServer(eng) })
	return srv, nil
}

// Capacity is fleets of 1, 4 and 16 replicas draining a backlog against an
// engine of capacity C, adaptive (the production defaults) and fixed (32
// calls at once a replica, no limit, no retry budget: the pipeline before
// issue 12), in the same run.
type Capacity struct {
	Engine  EngineSpec    `json:"engine"`
	N       int           `json:"n"`
	Ideal   time.Duration `json:"ideal_ns"`    // N / C
	Longest time.Duration `json:"deadline_ns"` // a fleet still draining then is stopped
	Rows    []CapacityRow `json:"rows"`
}

// CapacityRow is one fleet size.
type CapacityRow struct {
	Replicas int      `json:"replicas"`
	Adaptive FleetRun `json:"adaptive"`
	Fixed    FleetRun `json:"fixed"`
}

// FleetRun is how one fleet drained the backlog.
type FleetRun struct {
	Drained bool `json:"drained"` // every read settled before the deadline
	// Elapsed is from the start of the fleet to the last read settled, or
	// to the deadline.
	Elapsed        time.Duration `json:"elapsed_ns"`
	Billed         int64         `json:"billed"`
	Goodput        float64       `json:"goodput_per_sec"` // Billed / Elapsed
	GoodputOverC   float64       `json:"goodput_over_capacity"`
	DrainOverIdeal float64       `json:"drain_over_ideal"` // Elapsed / Ideal: a floor when not drained
	Calls          int64         `json:"calls"`
	Shed           int64         `json:"shed"`
	ShedShare      float64       `json:"shed_share"` // Shed / Calls
	Duplicates     int64         `json:"duplicates"`
	// Latency of the calls the engine served, from arrival to answer.
	P50            time.Duration `json:"p50_ns"`
	P99            time.Duration `json:"p99_ns"`
	P99OverService float64       `json:"p99_over_service_time"`
	// DeadLetters by reason (permanent, exhausted, expired), every one
	// caused by the engine's overload here: the reads are valid and the
	// engine refuses none.
	DeadLetters   map[string]int `json:"dead_letters"`
	BreakerOpened int            `json:"breaker_opened"` // transitions to open, the fleet's sum
	RetriesSpent  int            `json:"retries_spent"`
	RetriesDenied int            `json:"retries_denied"`
	// Diagnostics are the fleet's sums of the counters that explain a read
	// called more or fewer times than its attempts (those not zero): failed
	// calls not charged (uncharged_<why>), records not read or written
	// (record_errors_<op>), deliveries dropped for a lost lease, hand-backs
	// and settlements that failed.
	Diagnostics map[string]int `json:"diagnostics,omitempty"`
	// The fleet's summed limit, and the engine's calls in the system and
	// busy servers, sampled every 100ms while draining.
	LimitMedian  int     `json:"limit_sum_median"`
	MeanInSystem float64 `json:"engine_mean_in_system"`
	MeanBusy     float64 `json:"engine_mean_busy"`
	Peak         int     `json:"peak_calls_per_100ms"`
	// PeakAckPending is the most reads the durable had delivered and not
	// settled (its MaxAckPending room in use), sampled every 100ms.
	PeakAckPending int           `json:"peak_ack_pending"`
	Stall          time.Duration `json:"longest_stall_ns"`
	// Pauses is the fleet's meter_consumer_engine_pauses_total, where the
	// product has that metric (0 where it does not).
	Pauses int `json:"pauses,omitempty"`

	// started is when the fleet's time started (see startFleet).
	started time.Time
}

// deadLettered is the total of DeadLetters.
func (r FleetRun) deadLettered() int {
	n := 0
	for _, v := range r.DeadLetters {
		n += v
	}
	return n
}

func runCapacity(ctx context.Context, e *env, cfg Config) (*Capacity, error) {
	spec := capacityEngine
	ideal := time.Duration(float64(cfg.CapacityN) / spec.Capacity * float64(time.Second))
	out := &Capacity{Engine: spec, N: cfg.CapacityN, Ideal: ideal, Longest: ideal + cfg.FleetSlack}
	for _, r := range cfg.Replicas {
		row := CapacityRow{Replicas: r}
		for _, v := range []struct {
			adaptive bool
			to       *FleetRun
		}{{true, &row.Adaptive}, {false, &row.Fixed}} {
			var err error
			if *v.to, err = drainFleet(ctx, e, cfg, out, fleetSpec{replicas: r, adaptive: v.adaptive, seed: cfg.Seed + uint64(r)<<8}); err != nil {
				return nil, fmt.Errorf("%d replicas, adaptive %t: %w", r, v.adaptive, err)
			}
			x := *v.to
			cfg.progress("capacity %d replicas adaptive %t: drained %t in %s (ideal %s), goodput %.2f C, shed %.1f%%, p99 %s (%.2fx), dead-lettered %d, breaker opened %d, limit sum %d",
				r, v.adaptive, x.Drained, x.Elapsed.Round(time.Millisecond), ideal.Round(time.Millisecond), x.GoodputOverC,
				100*x.ShedShare, x.P99.Round(10*time.Microsecond), x.P99OverService, x.deadLettered(), x.BreakerOpened, x.LimitMedian)
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// drainFleet publishes the backlog, then drains it with spec's fleet
// against a fresh engine of c's, until every read is settled or the
// deadline.
func drainFleet(ctx context.Context, e *env, cfg Config, c *Capacity, spec fleetSpec) (FleetRun, error) {
	srv, err := newEngine(ctx, c.Engine, cfg.Seed, uint64(spec.replicas)<<1|b2u(spec.adaptive))
	if err != nil {
		return FleetRun{}, err
	}
	defer srv.Close()
	out, err := drainBacklog(ctx, e, srv, c.N, c.Longest, fmt.Sprintf("capacity-%d-%t", spec.replicas, spec.adaptive), spec)
	if err != nil {
		return out, err
	}
	out.GoodputOverC = out.Goodput / c.Engine.Capacity
	out.DrainOverIdeal = out.Elapsed.Seconds() / c.Ideal.Seconds()
	out.P99OverService = out.P99.Seconds() / c.Engine.ServiceTime.Seconds()
	return out, nil
}

// drainBacklog publishes n reads, then drains them with spec's fleet on
// durable against srv, until every read is settled or longest has passed.
func drainBacklog(ctx context.Context, e *env, srv *simengine.Server, n int, longest time.Duration, durable string, spec fleetSpec) (FleetRun, error) {
	return drainTraffic(ctx, e, srv, traffic{backlog: n}, longest, durable, spec)
}

// traffic is what a fleet drains: a backlog of reads 0..backlog-1 published
// before the fleet starts, then what then publishes once it runs (reads
// backlog.. on: a paced trickle, or a second phase), returning the stream
// sequence of its last read (0 for none). The fleet is done when every
// read is settled or, with done, as soon as the engine's Stats satisfy it.
type traffic struct {
	backlog int
	then    func(ctx context.Context, js jetstream.JetStream) (last uint64, err error)
	done    func(simengine.Stats) bool
}

// drainTraffic publishes tr's backlog, then drains it and what tr then
// publishes with spec's fleet on durable against srv, until tr is done or
// longest has passed from the fleet's start.
func drainTraffic(ctx context.Context, e *env, srv *simengine.Server, tr traffic, longest time.Duration, durable string, spec fleetSpec) (FleetRun, error) {
	var out FleetRun
	if err := e.reset(ctx); err != nil {
		return out, err
	}
	var last uint64
	var err error
	labelled(ctx, sidePublisher, func(ctx context.Context) { last, err = publishBacklog(ctx, e.js, 0, tr.backlog) })
	if err != nil {
		return out, err
	}
	spec.url = srv.URL
	cons, err := e.durable(ctx, durable, 0)
	if err != nil {
		return out, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)

	f, err := startFleet(ctx, e, durable, spec)
	if err != nil {
		return out, err
	}
	smp := sample(f, spec.replicas, srv.Engine, cons)
	wctx, cancel := context.WithTimeout(ctx, longest)
	if tr.then != nil {
		var then uint64
		labelled(wctx, sidePublisher, func(ctx context.Context) { then, err = tr.then(ctx, e.js) })
		last = max(last, then)
	}
	switch {
	case err != nil:
	case tr.done != nil:
		err = srv.Await(wctx, tr.done)
	default:
		out.Stall, err = e.waitAcked(wctx, cons, last, 20*time.Millisecond, f.ended)
	}
	cancel()
	out.started = f.started
	out.Elapsed = time.Since(f.started)
	st := srv.Stats()
	limits, inSystem, busy, peakAckPending := smp.stop()
	switch {
	case err == nil:
		out.Drained = true
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = nil // not drained in time: that is a figure
	}
	if serr := f.stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop: %w", serr))
	}
	if err != nil {
		return out, err
	}
	out.Billed, out.Calls, out.Shed, out.Duplicates = st.Billed, st.Calls, st.Shed, st.Duplicates
	out.Goodput = float64(st.Billed) / out.Elapsed.Seconds()
	if st.Calls > 0 {
		out.ShedShare = float64(st.Shed) / float64(st.Calls)
	}
	lat := srv.Latencies()
	out.P50, out.P99 = lat.Quantile(0.5), lat.Quantile(0.99)
	out.Peak = srv.PeakArrivals()
	out.DeadLetters = map[string]int{}
	for _, reason := range []string{"permanent", "exhausted", "expired"} {
		if n := int(f.counter("dead_letters_total", map[string]string{"reason": reason})); n > 0 {
			out.DeadLetters[reason] = n
		}
	}
	out.BreakerOpened = int(f.counter("breaker_transitions_total", map[string]string{"to": "open"}))
	out.RetriesSpent = int(f.counter("retries_total", map[string]string{"budget": "spent"}))
	out.RetriesDenied = int(f.counter("retries_total", map[string]string{"budget": "denied"}))
	out.Diagnostics = f.diagnostics()
	out.Pauses = int(f.counter("engine_pauses_total", nil))
	out.LimitMedian, out.MeanInSystem, out.MeanBusy = median(limits), mean(inSystem), mean(busy)
	out.PeakAckPending = peakAckPending
	return out, nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// CycleOpen is the same fleets started at one instant against a backlog,
// as when a billing cycle opens: the herd's first seconds.
type CycleOpen struct {
	Engine EngineSpec     `json:"engine"`
	N      int            `json:"n"`
	Window time.Duration  `json:"window_ns"` // measured from the start
	Rows   []CycleOpenRow `json:"rows"`
}

// CycleOpenRow is one fleet size.
type CycleOpenRow struct {
	Replicas int      `json:"replicas"`
	Adaptive CycleRun `json:"adaptive"`
	Fixed    CycleRun `json:"fixed"`
}

// CycleRun is the first Window of one fleet.
type CycleRun struct {
	// Peak is the most calls that arrived in any 100ms of the window;
	// PeakOverCapacity divides it by what the engine serves in 100ms.
	Peak             int     `json:"peak_calls_per_100ms"`
	PeakOverCapacity float64 `json:"peak_over_capacity"`
	Calls            int     `json:"calls"`
	Shed             int     `json:"shed"`
	ShedShare        float64 `json:"shed_share"`
	Billed           int     `json:"billed"`
	GoodputOverC     float64 `json:"goodput_over_capacity"` // billed in the window / (C x window)
}

// runCycleOpen starts each fleet at one instant on a backlog larger than
// the engine serves in the window, and measures the window from the engine's
// ledger.
func runCycleOpen(ctx context.Context, e *env, cfg Config) (*CycleOpen, error) {
	spec := capacityEngine
	window := cfg.CycleWindow
	// Twice what the engine serves in the window: the backlog never runs
	// out while it is measured.
	n := int(2 * spec.Capacity * window.Seconds())
	out := &CycleOpen{Engine: spec, N: n, Window: window}
	for _, r := range cfg.Replicas {
		row := CycleOpenRow{Replicas: r}
		for _, v := range []struct {
			adaptive bool
			to       *CycleRun
		}{{true, &row.Adaptive}, {false, &row.Fixed}} {
			var err error
			if *v.to, err = cycleRun(ctx, e, cfg, out, fleetSpec{replicas: r, adaptive: v.adaptive, together: true, seed: cfg.Seed + uint64(r)<<8 + 1}); err != nil {
				return nil, fmt.Errorf("%d replicas, adaptive %t: %w", r, v.adaptive, err)
			}
			x := *v.to
			cfg.progress("cycle-open %d replicas adaptive %t: peak %d per 100ms (%.2fx capacity), shed %.1f%% of %d calls in %s, goodput %.2f C",
				r, v.adaptive, x.Peak, x.PeakOverCapacity, 100*x.ShedShare, x.Calls, window, x.GoodputOverC)
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

func cycleRun(ctx context.Context, e *env, cfg Config, c *CycleOpen, spec fleetSpec) (CycleRun, error) {
	var out CycleRun
	if err := e.reset(ctx); err != nil {
		return out, err
	}
	var err error
	labelled(ctx, sidePublisher, func(ctx context.Context) { _, err = publishBacklog(ctx, e.js, 0, c.N) })
	if err != nil {
		return out, err
	}
	srv, err := newEngine(ctx, c.Engine, cfg.Seed, 1<<32|uint64(spec.replicas)<<1|b2u(spec.adaptive))
	if err != nil {
		return out, err
	}
	defer srv.Close()
	spec.url = srv.URL
	durable := fmt.Sprintf("cycle-%d-%t", spec.replicas, spec.adaptive)
	if _, err := e.durable(ctx, durable, 0); err != nil {
		return out, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)

	f, err := startFleet(ctx, e, durable, spec)
	if err != nil {
		return out, err
	}
	select {
	case <-time.After(c.Window):
	case <-f.ended:
		err = errEnded
	case <-ctx.Done():
		err = ctx.Err()
	}
	if serr := f.stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop: %w", serr))
	}
	if err != nil {
		return out, err
	}
	from, to := f.started, f.started.Add(c.Window)
	var arrived []time.Time
	for _, calls := range srv.Ledger() {
		for _, call := range calls {
			if call.At.Before(from) || !call.At.Before(to) {
				continue
			}
			arrived = append(arrived, call.At)
			switch call.Outcome {
			case simengine.Shed:
				out.Shed++
			case simengine.Billed:
				out.Billed++
			}
		}
	}
	out.Calls = len(arrived)
	out.Peak = peakIn(sortTimes(arrived), spreadWindow)
	out.PeakOverCapacity = float64(out.Peak) / (c.Engine.Capacity * spreadWindow.Seconds())
	if out.Calls > 0 {
		out.ShedShare = float64(out.Shed) / float64(out.Calls)
	}
	out.GoodputOverC = float64(out.Billed) / (c.Engine.Capacity * c.Window.Seconds())
	return out, nil
}
