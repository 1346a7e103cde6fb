package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// serveEngine serves an engine of o on loopback.
func serveEngine(ctx context.Context, o simengine.Options) (*simengine.Server, error) {
	eng, err := simengine.New(o)
	if err != nil {
		return nil, fmt.Errorf("rate engine: %w", err)
	}
	var srv *simengine.Server
	labelled(ctx, sideDownstream, func(context.Context) { srv = simengine.NewServer(eng) })
	return srv, nil
}

// capacityOf is the calls a second an engine of o serves: Servers /
// ServiceTime.
func capacityOf(o simengine.Options) float64 { return float64(o.Servers) / o.ServiceTime.Seconds() }

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

	started time.Time // when the fleet's time started: before it connects
}

// deadLettered is the total of DeadLetters.
func (r FleetRun) deadLettered() int {
	n := 0
	for _, v := range r.DeadLetters {
		n += v
	}
	return n
}

// traffic is what a variant drains: a backlog of reads 0..backlog-1 published
// before it starts, then what then publishes once it runs (reads
// backlog.. on: a paced trickle, or a second phase), returning the stream
// sequence of its last read (0 for none). The variant is done when every
// read is settled or, with done, as soon as the engine's Stats satisfy it.
type traffic struct {
	backlog int
	pending int // the durable's MaxAckPending (0: the production 10,000)
	then    func(ctx context.Context, js jetstream.JetStream) (last uint64, err error)
	done    func(simengine.Stats) bool
}

// pass is when a variant started draining, for how long, and whether it
// was done before the deadline.
type pass struct {
	started time.Time
	elapsed time.Duration
	drained bool
}

// drive publishes tr's backlog on fresh streams (read i at stream sequence
// i+1, as the ledger's measures take it), starts start on a fresh durable,
// publishes what tr then publishes, and waits until tr is done or longest
// has passed from the start, then stops the variant. Not done in time is a
// figure, not an error.
func (e *env) drive(ctx context.Context, srv *simengine.Server, tr traffic, longest time.Duration, durable string, start starter) (p pass, err error) {
	if err := e.reset(ctx); err != nil {
		return p, err
	}
	var last uint64
	labelled(ctx, sidePublisher, func(ctx context.Context) { last, err = publishBacklog(ctx, e.js, 0, tr.backlog) })
	if err != nil {
		return p, err
	}
	if last != uint64(tr.backlog) {
		return p, fmt.Errorf("read %d is at stream sequence %d, want %d: the measures take read i for sequence i+1", tr.backlog-1, last, tr.backlog)
	}
	cons, err := e.durable(ctx, durable, tr.pending)
	if err != nil {
		return p, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)
	p.started = time.Now()
	r, err := start(ctx, durable)
	if err != nil {
		return p, err
	}
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
		_, err = e.waitAcked(wctx, cons, last, 20*time.Millisecond, r.ended, nil)
	}
	cancel()
	p.elapsed = time.Since(p.started)
	switch {
	case err == nil:
		p.drained = true
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = nil // not drained in time: that is a figure
	}
	if serr := r.stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop: %w", serr))
	}
	return p, err
}

// drainTraffic drains tr with spec's fleet on durable against srv (see
// drive), sampling the fleet's summed limit every 100ms, and reads the
// engine's totals and the fleet's counters before it stops.
func drainTraffic(ctx context.Context, e *env, srv *simengine.Server, tr traffic, longest time.Duration, durable string, spec fleetSpec) (FleetRun, error) {
	var out FleetRun
	var f *fleet
	var st simengine.Stats
	var limits []int
	spec.url = srv.URL
	if spec.trace != nil {
		spec.trace.stats = srv.Stats
	}
	p, err := e.drive(ctx, srv, tr, longest, durable, func(ctx context.Context, durable string) (*running, error) {
		var err error
		if f, err = startFleet(ctx, e, durable, spec); err != nil {
			return nil, err
		}
		quit, sampled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return
				case <-t.C:
					limits = append(limits, f.limitSum())
				}
			}
		}()
		return &running{ended: f.ended, stop: func() error {
			st = srv.Stats()
			close(quit)
			<-sampled
			return f.stop()
		}}, nil
	})
	if err != nil {
		return out, err
	}
	out.started, out.Elapsed, out.Drained = p.started, p.elapsed, p.drained
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
