package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// Partial is one replica draining a backlog against a rate engine of ample
// capacity (nothing ever queues) whose latency spreads, uniformly or with a
// long tail, first with healthy reads only, then with a mix of reads that
// fail once (503, or 429 with Retry-After), and reads that always fail: the
// product with its production options against a bare HTTP client of the
// same concurrency, on the same backlog. Nothing here is overload, so the
// healthy reads should go as fast as the bare client's, the retries when
// their delay says, and the always-failing reads should spend exactly their
// attempts.
type Partial struct {
	N       int           `json:"n"`
	Longest time.Duration `json:"deadline_ns"` // a variant still draining then is stopped
	// Policy is the retry policy of both variants; Concurrency the bare
	// client's calls in flight (the product's most).
	Policy      string       `json:"policy"`
	MaxAttempts int          `json:"max_attempts"`
	Concurrency int          `json:"bare_concurrency"`
	Rows        []PartialRow `json:"rows"`
}

// PartialRow is one latency shape and one read mix.
type PartialRow struct {
	Shape   LatencyShape `json:"shape"`
	Mix     PartialMix   `json:"mix"`
	Bare    PartialRun   `json:"bare"`
	Product PartialRun   `json:"product"`
	// Ratio is the product's healthy goodput over the bare client's; Target
	// what it should reach.
	Ratio  float64 `json:"goodput_ratio"`
	Target float64 `json:"goodput_target"`
}

// PartialRun is how one variant drained the backlog.
type PartialRun struct {
	Drained bool `json:"drained"` // every read settled before the deadline
	// Elapsed is from the variant's start to the last read settled, or to
	// the deadline.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Healthy reads (200 to every call); HealthyBilled of them billed, the
	// last of them at HealthyElapsed from the start (HealthyDone), or the
	// deadline when some were not; Goodput is HealthyBilled /
	// HealthyElapsed.
	Healthy        int           `json:"healthy"`
	HealthyBilled  int           `json:"healthy_billed"`
	HealthyDone    bool          `json:"healthy_all_billed"`
	HealthyElapsed time.Duration `json:"healthy_elapsed_ns"`
	Goodput        float64       `json:"healthy_goodput_per_sec"`
	Calls          int64         `json:"calls"`
	Billed         int64         `json:"billed"`
	// Lateness of each retry: from the answer of the failed call to the
	// read's next call, less the delay the variant asked for it (the
	// product's "nak" log line). GapPastCeiling is the same gap less the
	// most the policy may ask after that attempt, seen from outside.
	Lateness       Lateness `json:"lateness"`
	GapPastCeiling Lateness `json:"gap_past_ceiling"`
	// The reads that always fail: the fewest and most calls of one, and how
	// many were dead-lettered (terminated, for the bare client).
	AlwaysBad          int `json:"always_failing"`
	AlwaysCallsMin     int `json:"always_failing_calls_min"`
	AlwaysCallsMax     int `json:"always_failing_calls_max"`
	AlwaysDeadLettered int `json:"always_failing_dead_lettered"`
	// BillableDeadLettered reads were dead-lettered though the engine
	// would have billed them.
	BillableDeadLettered int            `json:"billable_dead_lettered"`
	DeadLetters          map[string]int `json:"dead_letters,omitempty"` // the product's, by reason
	// The product's limit (median of samples every 100ms; the bare
	// client's concurrency), breaker openings and retries.
	LimitMedian   int `json:"limit_median"`
	BreakerOpened int `json:"breaker_opened"`
	RetriesSpent  int `json:"retries_spent"`
	RetriesDenied int `json:"retries_denied"`
	// The product's Diagnostics (FleetRun's), and the first debug lines of
	// its sheds credited as the engine's (what its view said then).
	Diagnostics map[string]int `json:"diagnostics,omitempty"`
	Credited    []string       `json:"credited,omitempty"`
	// The engine's latency of the calls it served, from arrival to answer.
	EngineP50 time.Duration `json:"engine_p50_ns"`
	EngineP99 time.Duration `json:"engine_p99_ns"`
}

// partialTarget is the healthy goodput ratio each mix should reach.
func partialTarget(m PartialMix) float64 {
	if m == healthyMix {
		return 0.9
	}
	return 0.8
}

// runPartial runs each latency shape with each read mix: the bare client,
// then the product, each on a fresh durable and engine, on the same
// backlog of cfg.PartialN reads.
func runPartial(ctx context.Context, e *env, cfg Config) (*Partial, error) {
	p := cfg.PartialRetry
	out := &Partial{N: cfg.PartialN, Longest: cfg.PartialFor, MaxAttempts: p.MaxAttempts, Concurrency: httpConcurrency,
		Policy: fmt.Sprintf("base %s, cap %s, %d attempts, Retry-After honoured up to %s", p.Base, p.Cap, p.MaxAttempts, p.MaxServerWait)}
	for si, shape := range []LatencyShape{uniformShape, longTailShape} {
		for mi, mix := range []PartialMix{healthyMix, partialMix} {
			seed := cfg.Seed + uint64(si)<<4 + uint64(mi)
			row := PartialRow{Shape: shape, Mix: mix, Target: partialTarget(mix)}
			kinds := mix.kinds(cfg.PartialN, seed)
			for _, v := range []struct {
				name  string
				drain func(context.Context, *env, Config, *simengine.Server, []readKind, uint64) (PartialRun, error)
				to    *PartialRun
			}{{"bare", partialBare, &row.Bare}, {"product", partialProduct, &row.Product}} {
				srv, err := partialEngine(ctx, shape, kinds, seed)
				if err != nil {
					return nil, err
				}
				*v.to, err = v.drain(ctx, e, cfg, srv, kinds, seed)
				srv.Close()
				if err != nil {
					return nil, fmt.Errorf("%s, %s reads, %s: %w", shape.Name, mix.Name, v.name, err)
				}
				x := *v.to
				for _, line := range x.Credited {
					cfg.progress("partial %s, %s reads, %s: credited shed: %s", shape.Name, mix.Name, v.name, line)
				}
				cfg.progress("partial %s, %s reads, %s: drained %t in %s, healthy goodput %.0f/s (all billed %t), lateness p99 %s (%d, %d missing), always-failing calls %d-%d, limit median %d, breaker opened %d, retries denied %d, diagnostics %v",
					shape.Name, mix.Name, v.name, x.Drained, x.Elapsed.Round(time.Millisecond), x.Goodput, x.HealthyDone,
					x.Lateness.P99.Round(time.Millisecond), x.Lateness.Count, x.Lateness.Missing, x.AlwaysCallsMin, x.AlwaysCallsMax,
					x.LimitMedian, x.BreakerOpened, x.RetriesDenied, x.Diagnostics)
			}
			if row.Bare.Goodput > 0 {
				row.Ratio = row.Product.Goodput / row.Bare.Goodput
			}
			out.Rows = append(out.Rows, row)
		}
	}
	return out, nil
}

// partialEngine serves an engine of shape, answering the reads as their
// kinds say once served, seeded from seed.
func partialEngine(ctx context.Context, shape LatencyShape, kinds []readKind, seed uint64) (*simengine.Server, error) {
	return mixEngine(ctx, shape, kinds, seed, false)
}

// mixEngine serves an engine of shape, answering the reads as their kinds
// say, seeded from seed: their failures at once (Refuse) when atOnce, or
// once served (Answer), after the shape's service time.
func mixEngine(ctx context.Context, shape LatencyShape, kinds []readKind, seed uint64, atOnce bool) (*simengine.Server, error) {
	o := shape.options(seed)
	if atOnce {
		o.Refuse = refusal(kinds)
	} else {
		o.Answer = answer(kinds)
	}
	return serveEngine(ctx, o)
}

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

// partialProduct drains the backlog with one replica of the product
// (startFleet): the production options (productionOptions, adaptive: the
// breaker, the adaptive limit and the retry budget as the binary builds
// them), with cfg.PartialRetry for its retry policy (the production one in
// a full run), measured as productMix does.
func partialProduct(ctx context.Context, e *env, cfg Config, srv *simengine.Server, kinds []readKind, seed uint64) (PartialRun, error) {
	run, _, err := productMix(ctx, e, srv, kinds, seed, cfg.PartialRetry, cfg.PartialFor,
		fleetSpec{replicas: 1}, traffic{backlog: len(kinds)}, fmt.Sprintf("partial-product-%d", seed), nil)
	return run, err
}

// mixRun is what productMix keeps beyond a PartialRun: the fleet's own
// figures, the reads dead-lettered with their reasons (by index), the log
// capture (delays asked, pauses) and the ledger.
type mixRun struct {
	fleet  FleetRun
	dead   map[int]string
	logs   *nakCapture
	ledger map[string][]simengine.Call
}

// productMix drains tr (reads of the given kinds) with spec's fleet of the
// product (startFleet: the production options, adaptive, with policy for
// its retry policy) on durable, until every read is settled or longest,
// and measures it from the engine's ledger. Its logger is logs, or (nil) a
// nakCapture enabled at debug, for the delay of each "nak" line, where the
// bench's other pipelines log JSON at info to nowhere: the consumer then
// writes a debug line for every read it settles, which the capture drops at
// once.
func productMix(ctx context.Context, e *env, srv *simengine.Server, kinds []readKind, seed uint64, policy retry.Policy,
	longest time.Duration, spec fleetSpec, tr traffic, durable string, logs *nakCapture) (PartialRun, mixRun, error) {
	naks := logs
	if naks == nil {
		naks = newNakCapture()
	}
	spec.adaptive, spec.seed, spec.policy, spec.log = true, seed+1<<20, policy, naks
	f, err := drainTraffic(ctx, e, srv, tr, longest, durable, spec)
	if err != nil {
		return PartialRun{}, mixRun{}, err
	}
	dead, err := deadLetteredReads(ctx, e)
	if err != nil {
		return PartialRun{}, mixRun{}, err
	}
	run := PartialRun{Drained: f.Drained, Elapsed: f.Elapsed, Calls: f.Calls, Billed: f.Billed, DeadLetters: f.DeadLetters,
		LimitMedian: f.LimitMedian, BreakerOpened: f.BreakerOpened, RetriesSpent: f.RetriesSpent, RetriesDenied: f.RetriesDenied,
		Diagnostics: f.Diagnostics, EngineP50: f.P50, EngineP99: f.P99}
	ledger := srv.Ledger()
	partialOutcome{ledger: ledger, kinds: kinds, start: f.started, elapsed: f.Elapsed, naks: naks, policy: policy,
		deadLettered: func(i int) bool { _, ok := dead[i]; return ok }}.measure(&run)
	run.Credited = naks.credits()
	return run, mixRun{fleet: f, dead: dead, logs: naks, ledger: ledger}, nil
}

// partialBare drains the backlog with the bare client (bareRetrier).
func partialBare(ctx context.Context, e *env, cfg Config, srv *simengine.Server, kinds []readKind, seed uint64) (PartialRun, error) {
	return bareMix(ctx, e, srv, kinds, seed, cfg.PartialRetry, cfg.PartialFor, nil)
}

// bareMix drains a backlog of reads of the given kinds with the bare client
// (bareRetrier) and policy, until every read is settled or, with until, as
// soon as the engine's Stats satisfy it, or longest has passed.
func bareMix(ctx context.Context, e *env, srv *simengine.Server, kinds []readKind, seed uint64, policy retry.Policy,
	longest time.Duration, until func(simengine.Stats) bool) (PartialRun, error) {
	var run PartialRun
	if err := e.reset(ctx); err != nil {
		return run, err
	}
	n := len(kinds)
	var last uint64
	var err error
	labelled(ctx, sidePublisher, func(ctx context.Context) { last, err = publishBacklog(ctx, e.js, 0, n) })
	if err != nil {
		return run, err
	}
	if last != uint64(n) {
		return run, fmt.Errorf("read %d is at stream sequence %d, want %d: the measures take read i for sequence i+1", n-1, last, n)
	}
	durable := fmt.Sprintf("partial-bare-%d", seed)
	cons, err := e.durable(ctx, durable, 0)
	if err != nil {
		return run, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)

	naks, gaveUp := newNakCapture(), newSeqSet()
	start := time.Now()
	r, err := bareRetrier(e, srv.URL, policy, retry.NewRand(seed+2<<20), naks, gaveUp)(ctx, durable)
	if err != nil {
		return run, err
	}
	wctx, cancel := context.WithTimeout(ctx, longest)
	if until != nil {
		err = srv.Await(wctx, until)
	} else {
		_, err = e.waitAcked(wctx, cons, last, 20*time.Millisecond, r.ended)
	}
	cancel()
	run.Elapsed = time.Since(start)
	switch {
	case err == nil:
		run.Drained = true
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = nil // not drained in time: that is a figure
	}
	if serr := r.stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop: %w", serr))
	}
	if err != nil {
		return run, err
	}
	st := srv.Stats()
	lat := srv.Latencies()
	run.Calls, run.Billed, run.LimitMedian = st.Calls, st.Billed, httpConcurrency
	run.EngineP50, run.EngineP99 = lat.Quantile(0.5), lat.Quantile(0.99)
	partialOutcome{ledger: srv.Ledger(), kinds: kinds, start: start, elapsed: run.Elapsed, naks: naks, policy: policy,
		deadLettered: func(i int) bool { return gaveUp.has(uint64(i + 1)) }}.measure(&run)
	return run, nil
}
