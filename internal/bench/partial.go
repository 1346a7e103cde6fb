package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// PartialRun is how the product or the bare client drained a cell of the
// engine matrix, read from the engine's ledger (partialOutcome).
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
	// Lateness of each retry: from the answer of the failed call to the
	// read's next call, less the delay the variant asked for it (the
	// product's "nak" log line: no metric says which read was asked which
	// delay).
	Lateness Lateness `json:"lateness"`
	// The reads that always fail: the fewest and most calls of one.
	AlwaysBad      int `json:"always_failing"`
	AlwaysCallsMin int `json:"always_failing_calls_min"`
	AlwaysCallsMax int `json:"always_failing_calls_max"`
	// BillableDeadLettered reads were dead-lettered though the engine
	// would have billed them.
	BillableDeadLettered int `json:"billable_dead_lettered"`
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

// mixRun is what productMix keeps beyond a PartialRun: the fleet's own
// figures, the reads dead-lettered with their reasons (by index) and the
// ledger.
type mixRun struct {
	fleet  FleetRun
	dead   map[int]string
	ledger map[string][]simengine.Call
}

// productMix drains tr (reads of the given kinds) with spec's fleet of the
// product (startFleet: the production options, with policy for its retry
// policy) on durable, until every read is settled or longest, and measures
// it from the engine's ledger. Its logger is a nakCapture enabled at debug,
// for the delay of each "nak" line (no metric says which read was asked
// which delay), where the bench's other pipelines log JSON at info to
// nowhere: the consumer then writes a debug line for every read it
// settles, which the capture drops at once.
func productMix(ctx context.Context, e *env, srv *simengine.Server, kinds []readKind, seed uint64, policy retry.Policy,
	longest time.Duration, spec fleetSpec, tr traffic, durable string) (PartialRun, mixRun, error) {
	naks := newNakCapture()
	spec.seed, spec.policy, spec.log = seed+1<<20, policy, naks
	f, err := drainTraffic(ctx, e, srv, tr, longest, durable, spec)
	if err != nil {
		return PartialRun{}, mixRun{}, err
	}
	dead, err := deadLetteredReads(ctx, e)
	if err != nil {
		return PartialRun{}, mixRun{}, err
	}
	run := PartialRun{Drained: f.Drained, Elapsed: f.Elapsed}
	ledger := srv.Ledger()
	partialOutcome{ledger: ledger, kinds: kinds, start: f.started, elapsed: f.Elapsed, naks: naks,
		deadLettered: func(i int) bool { _, ok := dead[i]; return ok }}.measure(&run)
	return run, mixRun{fleet: f, dead: dead, ledger: ledger}, nil
}

// bareMix drains a backlog of reads of the given kinds with the bare client
// (bareRetrier) and policy, until the engine's Stats satisfy until, or
// longest has passed.
func bareMix(ctx context.Context, e *env, srv *simengine.Server, kinds []readKind, seed uint64, policy retry.Policy,
	longest time.Duration, until func(simengine.Stats) bool) (PartialRun, error) {
	naks, gaveUp := newNakCapture(), newSeqSet()
	p, err := e.drive(ctx, srv, traffic{backlog: len(kinds), done: until}, longest, fmt.Sprintf("partial-bare-%d", seed),
		bareRetrier(e, bareSpec{url: srv.URL, policy: policy, rnd: retry.NewRand(seed + 2<<20), hold: holdMax, naks: naks, gaveUp: gaveUp,
			opts: []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(httpConcurrency)}}))
	run := PartialRun{Drained: p.drained, Elapsed: p.elapsed}
	if err != nil {
		return run, err
	}
	partialOutcome{ledger: srv.Ledger(), kinds: kinds, start: p.started, elapsed: p.elapsed, naks: naks,
		deadLettered: func(i int) bool { return gaveUp.has(uint64(i + 1)) }}.measure(&run)
	return run, nil
}
