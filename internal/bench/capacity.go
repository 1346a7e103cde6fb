package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// EngineSpec is a rate engine with a capacity of the engine matrix.
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

// FleetRun is how one fleet drained the backlog.
type FleetRun struct {
	Drained bool `json:"drained"` // every read settled before the deadline
	// Elapsed is from the start of the fleet to the last read settled, or
	// to the deadline.
	Elapsed   time.Duration `json:"elapsed_ns"`
	Billed    int64         `json:"billed"`
	Goodput   float64       `json:"goodput_per_sec"` // Billed / Elapsed
	Calls     int64         `json:"calls"`
	Shed      int64         `json:"shed"`
	ShedShare float64       `json:"shed_share"` // Shed / Calls
	// DeadLetters by reason (permanent, exhausted, expired), the fleet's
	// meter_consumer_dead_letters_total.
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
	// LimitMedian is the median of the fleet's summed limit, sampled every
	// 100ms while draining.
	LimitMedian int `json:"limit_sum_median"`
	// Pauses is the fleet's meter_consumer_engine_pauses_total: its pauses
	// of every call on a Retry-After.
	Pauses int `json:"pauses"`

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
	smp := sample(f)
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
		_, err = e.waitAcked(wctx, cons, last, 20*time.Millisecond, f.ended)
	}
	cancel()
	out.started = f.started
	out.Elapsed = time.Since(f.started)
	st := srv.Stats()
	limits := smp.stop()
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
	out.Billed, out.Calls, out.Shed = st.Billed, st.Calls, st.Shed
	out.Goodput = float64(st.Billed) / out.Elapsed.Seconds()
	if st.Calls > 0 {
		out.ShedShare = float64(st.Shed) / float64(st.Calls)
	}
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
	out.LimitMedian = median(limits)
	return out, nil
}
