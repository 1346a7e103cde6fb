package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/retry"
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

// capacityOf is the calls a second an engine of o serves.
func capacityOf(o simengine.Options) float64 { return float64(o.Servers) / o.ServiceTime.Seconds() }

// FleetRun is how one fleet drained its traffic: the engine's totals and
// the sums of the fleet's counters (meter_consumer_*).
type FleetRun struct {
	Drained bool `json:"drained"` // every read settled before the deadline
	// Elapsed is from the fleet's start to the last read settled, or to
	// the deadline.
	Elapsed       time.Duration  `json:"elapsed_ns"`
	Billed        int64          `json:"billed"`
	Goodput       float64        `json:"goodput_per_sec"` // Billed / Elapsed
	Calls         int64          `json:"calls"`
	Shed          int64          `json:"shed"`
	ShedShare     float64        `json:"shed_share"`     // Shed / Calls
	DeadLetters   map[string]int `json:"dead_letters"`   // by reason: permanent, exhausted, expired
	BreakerOpened int            `json:"breaker_opened"` // transitions to open
	RetriesSpent  int            `json:"retries_spent"`
	RetriesDenied int            `json:"retries_denied"`
	// Diagnostics are the counters, not zero, that explain a read called
	// more or fewer times than its attempts, or a goodput: failed calls not
	// charged (uncharged_<why>), records not read or written
	// (record_errors_<op>), the engine view's dips and trials by verdict,
	// deliveries dropped for a lost lease, hand-backs and failed settlements.
	Diagnostics map[string]int `json:"diagnostics,omitempty"`
	LimitMedian int            `json:"limit_sum_median"` // of the summed limit, sampled every 100ms
	Pauses      int            `json:"pauses"`           // of every call on a Retry-After (engine_pauses_total)

	started time.Time // when the fleet's time started: before it connects
}

// deadLettered is the total of DeadLetters.
func (r FleetRun) deadLettered() (n int) {
	for _, v := range r.DeadLetters {
		n += v
	}
	return n
}

// traffic is what a variant drains: a backlog of reads 0..backlog-1
// published on fresh streams before it starts (or, with published, the
// reads up to that stream sequence, already there), then what then
// publishes once it runs (a paced trickle, or a second phase), returning
// the stream sequence of its last read (0 for none). The variant is done
// when every read is settled or, with done, as soon as the engine's Stats
// satisfy it.
type traffic struct {
	backlog   int
	published uint64
	pending   int           // the durable's MaxAckPending (0: the production 10,000)
	poll      time.Duration // how often the ack floor is read (0: every 20ms)
	then      func(ctx context.Context, js jetstream.JetStream) (last uint64, err error)
	done      func(simengine.Stats) bool
}

// pass is how a variant drained: when it started, for how long, whether it
// was done in time, the process CPU it took (getrusage: the in-process NATS
// server and engine included) and the longest time the ack floor did not
// move (a stalled pull shows up there).
type pass struct {
	started time.Time
	elapsed time.Duration
	drained bool
	cpu     time.Duration
	stall   time.Duration
}

// drive publishes tr's backlog on fresh streams (read i at stream sequence
// i+1, as the ledger's measures take it), starts start on a fresh durable,
// publishes what tr then publishes, and waits until tr is done or longest
// has passed from the start, then stops the variant. Not done in time is a
// figure, not an error.
func (e *env) drive(ctx context.Context, srv *simengine.Server, tr traffic, longest time.Duration, durable string, start starter) (p pass, err error) {
	last := tr.published
	if last == 0 {
		if err := e.reset(ctx); err != nil {
			return p, err
		}
		labelled(ctx, sidePublisher, func(ctx context.Context) { last, err = publishBacklog(ctx, e.js, 0, tr.backlog) })
		if err != nil {
			return p, err
		}
		if last != uint64(tr.backlog) {
			return p, fmt.Errorf("read %d is at stream sequence %d, want %d: the measures take read i for sequence i+1", tr.backlog-1, last, tr.backlog)
		}
	}
	cons, err := e.durable(ctx, durable, tr.pending)
	if err != nil {
		return p, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)
	runtime.GC() // garbage of an earlier pass is not charged to this one
	cpu0 := processCPU()
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
		p.stall, err = e.waitAcked(wctx, cons, last, cmp.Or(tr.poll, 20*time.Millisecond), r.ended, nil)
	}
	cancel()
	p.elapsed, p.cpu = time.Since(p.started), processCPU()-cpu0
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

// drain drains tr against srv within longest (see drive) with the cell's
// fleet of spec's replicas, seed and policy (zero: the matrix's), traced
// when the configuration asks for it, sampling its summed limit every
// 100ms; it reads the engine's totals and the fleet's counters before the
// fleet stops.
func (m *matrix) drain(kind string, srv *simengine.Server, tr traffic, longest time.Duration, spec fleetSpec) (FleetRun, error) {
	spec.url, spec.seed = srv.URL, spec.seed+1<<20
	if spec.policy == (retry.Policy{}) {
		spec.policy = m.p.Policy
	}
	if m.cfg.EnginesTrace != nil {
		spec.trace = &tracer{w: m.cfg.EnginesTrace, cell: fmt.Sprintf("%s/%s/%dr", m.p.Name, kind, spec.replicas), stats: srv.Stats}
	}
	var f *fleet
	var st simengine.Stats
	var limits []int
	durable := fmt.Sprintf("engines-%s-%d-%s-%d", m.p.Name, m.n, kind, spec.replicas)
	p, err := m.e.drive(m.ctx, srv, tr, longest, durable, func(ctx context.Context, durable string) (*running, error) {
		var err error
		if f, err = startFleet(ctx, m.e, durable, spec); err != nil {
			return nil, err
		}
		stopSampling := every(100*time.Millisecond, func() {
			sum := 0
			for _, l := range f.limits() {
				sum += l
			}
			limits = append(limits, sum)
		})
		return &running{ended: f.ended, stop: func() error {
			st = srv.Stats()
			stopSampling()
			return f.stop()
		}}, nil
	})
	if err != nil {
		return FleetRun{}, err
	}
	out := FleetRun{started: p.started, Elapsed: p.elapsed, Drained: p.drained, Billed: st.Billed, Calls: st.Calls, Shed: st.Shed,
		Goodput: float64(st.Billed) / p.elapsed.Seconds(), DeadLetters: map[string]int{}, Diagnostics: f.diagnostics(),
		BreakerOpened: f.counter("breaker_transitions_total", "to", "open"), Pauses: f.counter("engine_pauses_total"),
		RetriesSpent: f.counter("retries_total", "budget", "spent"), RetriesDenied: f.counter("retries_total", "budget", "denied")}
	if st.Calls > 0 {
		out.ShedShare = float64(st.Shed) / float64(st.Calls)
	}
	for _, reason := range []string{"permanent", "exhausted", "expired"} {
		if n := f.counter("dead_letters_total", "reason", reason); n > 0 {
			out.DeadLetters[reason] = n
		}
	}
	if len(limits) > 0 {
		slices.Sort(limits)
		out.LimitMedian = limits[len(limits)/2]
	}
	return out, nil
}
