package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// EnginesPolicy is a retry policy the engine matrix runs with, named.
type EnginesPolicy struct {
	Name   string       `json:"name"`
	Policy retry.Policy `json:"policy"`
	// Trickle is how long the trickle cells publish at Config.EnginesRate.
	Trickle time.Duration `json:"trickle_ns"`
}

// productionPolicy is config.Default's retry policy (base 500ms, cap 30s,
// 6 attempts), its trickles 15s; shortPolicy has the short delays of issue
// 39's measures (base 50ms, cap 400ms, 4 attempts), its trickles 10s.
func productionPolicy() EnginesPolicy { return enginesPolicy("production", 0, 0, 0, 15*time.Second) }
func shortPolicy() EnginesPolicy {
	return enginesPolicy("short", 50*time.Millisecond, 400*time.Millisecond, 4, 10*time.Second)
}

// enginesPolicy is the production retry policy named name, with base, cap
// and attempts when base is set, its trickles trickle long.
func enginesPolicy(name string, base, cap time.Duration, attempts int, trickle time.Duration) EnginesPolicy {
	p := config.Default().Retry.Policy()
	if base > 0 {
		p.Base, p.Cap, p.MaxAttempts = base, cap, attempts
	}
	return EnginesPolicy{Name: name, Policy: p, Trickle: trickle}
}

// EnginesPolicyNames are the policies EnginesPolicyNamed knows.
func EnginesPolicyNames() []string { return []string{"production", "short"} }

// EnginesPolicyNamed returns the matrix's policy of that name (see
// productionPolicy and shortPolicy).
func EnginesPolicyNamed(name string) (EnginesPolicy, error) {
	for _, p := range []EnginesPolicy{productionPolicy(), shortPolicy()} {
		if p.Name == name {
			return p, nil
		}
	}
	return EnginesPolicy{}, fmt.Errorf("unknown policy %q (want one of %s)", name, strings.Join(EnginesPolicyNames(), ", "))
}

// Engines is the engine matrix of issue 39: every engine shape the product
// should hold against, each cell drained by fleets of the production
// pipeline (startFleet) and judged against its targets, once per policy.
// Its sizes are the report's configuration.
type Engines struct {
	Runs []EnginesRun `json:"runs"`
}

// EnginesRun is the matrix with one retry policy.
type EnginesRun struct {
	Policy EnginesPolicy `json:"policy"`
	Took   time.Duration `json:"took_ns"`
	Cells  []EngineCell  `json:"cells"`
}

// The kinds of cell, each with its targets (see EngineCell.rows).
const (
	cellCapacity = "capacity"
	cellHealthy  = "healthy"
	cellMix      = "mix"
	cellSwitch   = "switch"
	cellAccount  = "account"
	cellRandom   = "random"
	cellJoin     = "join"
	cellDown     = "down"
)

// EngineCell is one engine, fleet size and traffic of the matrix: what the
// product did, and the figures its targets judge (zero where its kind
// measures none).
type EngineCell struct {
	Kind     string `json:"kind"`
	Engine   string `json:"engine"`
	Replicas int    `json:"replicas"`
	Traffic  string `json:"traffic"`
	Trickle  bool   `json:"trickle,omitempty"`
	Reads    int    `json:"reads"` // published
	// Product is the fleet's run; LimitBound its most calls in flight
	// (replicas x consumer.concurrency).
	Product    FleetRun `json:"product"`
	LimitBound int      `json:"limit_bound"`

	// Goodput is the product's healthy reads billed/s (the others' for
	// account; for switch the second phase's, from a second after the
	// switch), BareGoodput the bare client's on the same reads and engine
	// shape; *Done that every healthy read was billed.
	Goodput     float64 `json:"goodput_per_sec,omitempty"`
	GoodputDone bool    `json:"goodput_done,omitempty"`
	BareGoodput float64 `json:"bare_goodput_per_sec,omitempty"`
	BareDone    bool    `json:"bare_done,omitempty"`
	Capacity    float64 `json:"capacity_per_sec,omitempty"` // the engine's C, where it has one

	// The always-503 reads, their fewest and most calls, and how many were
	// dead-lettered exhausted.
	AlwaysBad       int `json:"always_503,omitempty"`
	AlwaysCallsMin  int `json:"always_503_calls_min,omitempty"`
	AlwaysCallsMax  int `json:"always_503_calls_max,omitempty"`
	AlwaysExhausted int `json:"always_503_exhausted,omitempty"`
	// Recall are the gaps of the 429 reads (the throttled account's) from
	// their 429 to their next call; WaitFloor the least the account's
	// should be, min(60s, max_server_wait).
	Recall    Gaps          `json:"recall_gaps"`
	WaitFloor time.Duration `json:"wait_floor_ns,omitempty"`
	// Lateness of the retries past the delay asked; BillableDeadLettered
	// reads were dead-lettered though the engine would have billed them.
	Lateness             Lateness `json:"lateness"`
	BillableDeadLettered int      `json:"billable_dead_lettered,omitempty"`

	// Random failures: the reads exhausted, and those expected by chance
	// with the binomial band around them.
	Exhausted int     `json:"exhausted,omitempty"`
	Expected  float64 `json:"expected,omitempty"`
	BandLow   float64 `json:"band_low,omitempty"`
	BandHigh  float64 `json:"band_high,omitempty"`

	SwitchAfter time.Duration `json:"switch_after_ns,omitempty"` // from the fleet's start
	// What a replica joining an engine kept full by others billed a
	// second, and what the others did.
	ReplicaPerSec float64 `json:"replica_per_sec,omitempty"`
	CrowdPerSec   float64 `json:"crowd_per_sec,omitempty"`
	// DownCalls were answered while the engine was down; Recovery is from
	// its return to the last read billed; AllBilled that every read was.
	DownCalls int64         `json:"down_calls,omitempty"`
	Recovery  time.Duration `json:"recovery_ns,omitempty"`
	AllBilled bool          `json:"all_billed,omitempty"`
}

// Sizes of the matrix not taken from Config.
const (
	randomFailShare = 0.4 // of the random cell's calls fail, whatever the load
	// crowdClients closed loops of crowdInFlight calls each keep the join
	// cell's engine full, a shed retried after crowdPause.
	crowdClients  = 4
	crowdInFlight = 4
	crowdPause    = 5 * time.Millisecond
	// drainFloor is the rate a cell's backlog is given to drain at before
	// it is stopped, beside the policy's longest chain and the slack.
	drainFloor = 500
	// secondPhase is how many times the first phase's reads the switch's
	// second phase publishes: enough that its goodput, measured from a
	// second after the switch, is not that of the long tail's last calls.
	secondPhase = 3
)

// The matrix's engines with a capacity. capacityEngine is 8 servers of 6ms
// (1,333 calls a second, about the engine the overload of issue 12 was seen
// against), their service times spread ±25% as the demo's are, a queue of
// 16 (a full queue triples the latency), shedding with 503 past it, a fifth
// of them with Retry-After 1s. joinEngine is the join cell's: 2 servers of
// 20ms (100 calls a second) and a queue of 4, shedding with 503 past it.
var (
	capacityEngine = simengine.Options{Servers: 8, ServiceTime: 6 * time.Millisecond, Jitter: 0.25, Queue: 16,
		Shedding: simengine.Shedding{RetryAfterShare: 0.2, RetryAfter: time.Second}}
	joinEngine = simengine.Options{Servers: 2, ServiceTime: 20 * time.Millisecond, Jitter: 0.25, Queue: 4}
)

// runEngines runs the matrix once per policy of cfg.
func runEngines(ctx context.Context, e *env, cfg Config) (*Engines, error) {
	out := &Engines{}
	for _, p := range cfg.EnginesPolicies {
		t0 := time.Now()
		// Seeds are the policy's and the cell's place in the whole matrix,
		// so that a cell run alone (EnginesCells, EnginesPolicies) draws
		// what it draws in a full run.
		m := &matrix{ctx: ctx, e: e, cfg: cfg, p: p, seed: cfg.Seed + uint64(slices.Index(EnginesPolicyNames(), p.Name)+1)<<40}
		run := EnginesRun{Policy: p}
		for _, c := range m.cells() {
			if !cellChosen(c.name, cfg.EnginesCells) {
				m.n++ // its turn, as in a full run
				continue
			}
			cell, err := c.run()
			if err != nil {
				return nil, fmt.Errorf("%s policy, %s: %w", p.Name, c.name, err)
			}
			run.Cells = append(run.Cells, cell)
			rows := cell.rows(p)
			cfg.progress("engines %s: %s, %s in %s: %s", p.Name, c.name, map[bool]string{true: "drained", false: "not drained"}[cell.Product.Drained],
				cell.Product.Elapsed.Round(time.Millisecond), rows[len(rows)-1].Ours)
		}
		run.Took = time.Since(t0)
		out.Runs = append(out.Runs, run)
	}
	return out, nil
}

// matrix runs the cells of one policy.
type matrix struct {
	ctx  context.Context
	e    *env
	cfg  Config
	p    EnginesPolicy
	seed uint64
	n    int // cells started, for seeds and durable names
}

// matrixCell is a cell of the matrix, named as EnginesCells chooses it.
type matrixCell struct {
	name string
	run  func() (EngineCell, error)
}

// cells are the matrix's cells in the order they run: the rows of issue
// 39's table.
func (m *matrix) cells() []matrixCell {
	var cs []matrixCell
	add := func(name string, run func() (EngineCell, error)) { cs = append(cs, matrixCell{name, run}) }
	fleets := func(name string, run func(r int) (EngineCell, error), sizes []int) {
		for _, r := range sizes {
			add(fmt.Sprintf("%s, %d replicas", name, r), func() (EngineCell, error) { return run(r) })
		}
	}
	reads := func(c readsCell) func() (EngineCell, error) { return func() (EngineCell, error) { return m.reads(c) } }
	fleets("capacity", m.capacity, m.cfg.Replicas)
	for _, shape := range []LatencyShape{uniformShape, tailShape} {
		add("healthy "+shape.Name, reads(readsCell{kind: cellHealthy, engine: "healthy, " + shape.Name, mix: healthyMix, shape: shape, atOnce: true, replicas: 1}))
	}
	mix := func(atOnce, trickled bool) func(r int) (EngineCell, error) {
		when := map[bool]string{true: "at once", false: "after the service time"}[atOnce]
		return func(r int) (EngineCell, error) {
			return m.reads(readsCell{kind: cellMix, engine: "partial mix, failures answered " + when + ", healthy " + uniformShape.Name,
				mix: partialMix, shape: uniformShape, atOnce: atOnce, trickled: trickled, replicas: r, recall: tooMany})
		}
	}
	fleets("partial mix at once", mix(true, false), m.cfg.EnginesFleets)
	fleets("partial mix at once, trickle", mix(true, true), m.cfg.EnginesFleets)
	fleets("partial mix after service", mix(false, false), m.cfg.EnginesFleets)
	add("partial mix, then the long tail", m.switched)
	// The account's 429s ask for 60s, which max_server_wait clamps.
	throttledPolicy := m.p.Policy
	throttledPolicy.MaxServerWait = m.cfg.EnginesThrottleWait
	for _, trickled := range []bool{false, true} {
		add("one account throttled"+map[bool]string{true: ", trickle"}[trickled], reads(readsCell{kind: cellAccount,
			engine: "one account throttled (429, Retry-After: 60, at once), healthy " + uniformShape.Name, mix: accountMix, shape: uniformShape,
			atOnce: true, trickled: trickled, replicas: 1, policy: throttledPolicy, wait: throttledPolicy.MaxServerWait, recall: throttled}))
	}
	fleets("random failures", m.random, m.cfg.EnginesFleets)
	add("joining a full engine", m.join)
	fleets("down", m.down, m.cfg.EnginesFleets)
	return cs
}

// cellChosen reports whether the cell named name runs: any does when
// chosen is empty, else one whose name holds one of chosen.
func cellChosen(name string, chosen []string) bool {
	return len(chosen) == 0 || slices.ContainsFunc(chosen, func(c string) bool { return strings.Contains(name, c) })
}

// start starts a cell of kind on engine with r replicas: its seed, and it.
func (m *matrix) start(kind, engine string, r int) (uint64, EngineCell) {
	m.n++
	return m.seed + uint64(m.n)<<12, EngineCell{Kind: kind, Engine: engine, Replicas: r, LimitBound: r * httpConcurrency}
}

// longest is how long a cell of n reads may take before it is stopped: n
// at drainFloor, the policy's longest chain of delays, extra and the slack.
func (m *matrix) longest(n int, extra time.Duration) time.Duration {
	return time.Duration(float64(n)/drainFloor*float64(time.Second)) + longestChain(m.p.Policy) + extra + m.cfg.EnginesSlack
}

// backlog drains a backlog of n with cell's fleet from an engine of o,
// within longest; measure, when set, reads the engine before it closes.
func (m *matrix) backlog(cell EngineCell, seed uint64, o simengine.Options, n int, longest time.Duration, measure func(*simengine.Server, *EngineCell)) (EngineCell, error) {
	cell.Traffic, cell.Reads = fmt.Sprintf("backlog %d", n), n
	srv, err := serveEngine(m.ctx, o)
	if err != nil {
		return cell, err
	}
	defer srv.Close()
	cell.Product, err = m.drain(cell.Kind, srv, traffic{backlog: n}, longest, fleetSpec{replicas: cell.Replicas, seed: seed})
	if err == nil && measure != nil {
		measure(srv, &cell)
	}
	return cell, err
}

// trickle publishes rate reads a second for d once the variant runs;
// seqs, when set, gets the stream sequence of each.
func trickle(rate int, d time.Duration, seqs *[]uint64) func(context.Context, jetstream.JetStream) (uint64, error) {
	return func(ctx context.Context, js jetstream.JetStream) (uint64, error) {
		s, err := publishPaced(ctx, js, rate, d)
		if seqs != nil {
			*seqs = s
		}
		if err != nil || len(s) == 0 {
			return 0, err
		}
		return s[len(s)-1], nil
	}
}

// capacity drains a backlog with r replicas from capacityEngine, allowed
// the time it takes at C rather than at drainFloor.
func (m *matrix) capacity(r int) (EngineCell, error) {
	o, n := capacityEngine, m.cfg.EnginesCapacityN
	seed, cell := m.start(cellCapacity, fmt.Sprintf("capacity C (%d servers x %s, queue %d, sheds at once)", o.Servers, o.ServiceTime, o.Queue), r)
	o.Rand = seeded(seed, uint64(r))
	cell.Capacity = capacityOf(o)
	ideal := time.Duration(float64(n) / cell.Capacity * float64(time.Second))
	return m.backlog(cell, seed, o, n, ideal+longestChain(m.p.Policy)+m.cfg.EnginesSlack, nil)
}

// readsCell is a cell of reads of a mix from an engine of a latency shape,
// failing them at once or once served: a backlog, or a trickle.
type readsCell struct {
	kind, engine     string
	mix              readMix
	shape            LatencyShape
	atOnce, trickled bool
	replicas         int
	policy           retry.Policy  // zero: the matrix's
	wait             time.Duration // what the policy may make a read wait past its chain of delays
	recall           readKind      // the kind whose gaps to its second call are measured; healthy: none
}

// reads runs c: the bare client (for a backlog), then the product.
func (m *matrix) reads(c readsCell) (EngineCell, error) {
	seed, cell := m.start(c.kind, c.engine, c.replicas)
	cell.Trickle = c.trickled
	if c.policy == (retry.Policy{}) {
		c.policy = m.p.Policy
	}
	if c.recall == throttled {
		cell.WaitFloor = min(quotaAsked, c.policy.MaxServerWait)
	}
	n, tr, longest := m.cfg.EnginesN, traffic{backlog: m.cfg.EnginesN}, m.longest(m.cfg.EnginesN, c.wait)
	cell.Traffic = fmt.Sprintf("backlog %d", n)
	if c.trickled {
		n, tr, longest = int(int64(m.cfg.EnginesRate)*int64(m.p.Trickle)/int64(time.Second)), traffic{then: trickle(m.cfg.EnginesRate, m.p.Trickle, nil)}, m.p.Trickle+m.longest(0, c.wait)
		cell.Traffic = fmt.Sprintf("%d reads/s for %s", m.cfg.EnginesRate, m.p.Trickle)
	}
	cell.Reads = n
	kinds := c.mix.kinds(n, seed)
	if !c.trickled {
		if err := m.bare(&cell, c.shape, kinds, seed, c.atOnce, c.policy); err != nil {
			return cell, err
		}
	}
	srv, err := mixEngine(m.ctx, c.shape, kinds, seed, c.atOnce)
	if err != nil {
		return cell, err
	}
	defer srv.Close()
	// The fleet logs to a nakCapture enabled at debug, for the delay of
	// each "nak" line (no metric says which read was asked which delay):
	// the consumer then writes a debug line for every read it settles,
	// which the capture drops at once.
	naks := newNakCapture()
	f, err := m.drain(c.kind, srv, tr, longest, fleetSpec{replicas: c.replicas, seed: seed, policy: c.policy, log: naks})
	if err != nil {
		return cell, err
	}
	dead, err := deadLetteredReads(m.ctx, m.e)
	if err != nil {
		return cell, err
	}
	cell.Product = f
	ledger := srv.Ledger()
	partialOutcome{ledger: ledger, kinds: kinds, start: f.started, elapsed: f.Elapsed, naks: naks,
		deadLettered: func(i int) (string, bool) { reason, ok := dead[i]; return reason, ok }}.measure(&cell)
	if c.recall != healthy {
		cell.Recall = recallGaps(ledger, kinds, c.recall)
	}
	return cell, nil
}

// bare measures cell's BareGoodput and BareDone: the bare client
// (bare) with policy drains kinds from a fresh engine of shape until
// every read but the always-503 ones is billed, or the deadline.
func (m *matrix) bare(cell *EngineCell, shape LatencyShape, kinds []readKind, seed uint64, atOnce bool, policy retry.Policy) error {
	srv, err := mixEngine(m.ctx, shape, kinds, seed, atOnce)
	if err != nil {
		return err
	}
	defer srv.Close()
	naks, gaveUp, billable := newNakCapture(), newSeqSet(), int64(len(kinds)-count(kinds, alwaysBad))
	tr := traffic{backlog: len(kinds), done: func(st simengine.Stats) bool { return st.Billed >= billable }}
	p, err := m.e.drive(m.ctx, srv, tr, m.longest(len(kinds), policy.MaxServerWait), fmt.Sprintf("partial-bare-%d", seed),
		bare(m.e, bareSpec{url: srv.URL, workers: httpConcurrency, pull: httpConcurrency, policy: policy, rnd: retry.NewRand(seed + 2<<20),
			hold: holdMax, naks: naks, gaveUp: gaveUp}))
	if err != nil {
		return err
	}
	var run EngineCell
	partialOutcome{ledger: srv.Ledger(), kinds: kinds, start: p.started, elapsed: p.elapsed, naks: naks,
		deadLettered: func(i int) (string, bool) { return "", gaveUp.has(uint64(i + 1)) }}.measure(&run)
	cell.BareGoodput, cell.BareDone = run.Goodput, run.GoodputDone
	return nil
}

// switched drains a backlog of the partial mix answered at once, then
// switches the engine to the long tail and publishes secondPhase times as
// many healthy reads: their goodput from a second after the switch,
// against the bare client's on the long tail. The switch comes when every
// billable read of the first phase is billed, or after EnginesSwitchAfter.
func (m *matrix) switched() (EngineCell, error) {
	seed, cell := m.start(cellSwitch, "partial mix at once, then at once the "+tailShape.Name, 1)
	n, n2 := m.cfg.EnginesN, secondPhase*m.cfg.EnginesN
	cell.Traffic, cell.Reads = fmt.Sprintf("backlog %d, then %d", n, n2), n+n2
	if err := m.bare(&cell, tailShape, healthyMix.kinds(n2, seed), seed, true, m.p.Policy); err != nil {
		return cell, err
	}
	kinds := append(partialMix.kinds(n, seed), make([]readKind, n2)...) // the second phase's are healthy
	billable := int64(n - count(kinds, alwaysBad))
	srv, err := mixEngine(m.ctx, uniformShape, kinds, seed, true)
	if err != nil {
		return cell, err
	}
	defer srv.Close()
	var second atomic.Int64 // reads of the second phase billed
	var at time.Time
	tr := traffic{backlog: n, then: func(ctx context.Context, js jetstream.JetStream) (uint64, error) {
		wctx, cancel := context.WithTimeout(ctx, m.cfg.EnginesSwitchAfter)
		_ = srv.Await(wctx, func(st simengine.Stats) bool { return st.Billed >= billable })
		cancel()
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		srv.SetRefuse(nil)
		if err := srv.SetServiceTime(tailShape.ServiceTime, tailShape.Jitter); err != nil {
			return 0, err
		}
		srv.SetDelay(tailShape.delayFunc(seed))
		srv.SetAnswer(func(key string, _ int) (int, http.Header) {
			if i, ok := Index(key); ok && i >= n && !srv.Billed(key) {
				second.Add(1)
			}
			return http.StatusOK, nil
		})
		at = time.Now()
		return publishBacklog(ctx, js, n, n2)
	}, done: func(simengine.Stats) bool { return second.Load() >= int64(n2) }}
	run, err := m.drain(cellSwitch, srv, tr, m.longest(n+n2, m.cfg.EnginesSwitchAfter), fleetSpec{replicas: 1, seed: seed})
	if err != nil {
		return cell, err
	}
	cell.Product = run
	if !at.IsZero() {
		cell.SwitchAfter = at.Sub(run.started)
		cell.Goodput = billedFrom(srv.Ledger(), at, at.Add(time.Second))
		cell.GoodputDone = second.Load() >= int64(n2)
	}
	return cell, nil
}

// random drains a backlog with r replicas from an engine that fails
// randomFailShare of all calls at once, drawn call by call.
func (m *matrix) random(r int) (EngineCell, error) {
	seed, cell := m.start(cellRandom, fmt.Sprintf("%.0f%% of all calls 503 at random, at once, whatever the load; the rest %s", 100*randomFailShare, uniformShape.Name), r)
	n := m.cfg.EnginesN
	o := uniformShape.options(seed)
	o.Refuse = func(key string, k int) (int, http.Header) {
		if unitDraw(seed^0x40, key, k) < randomFailShare {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}
	cell.Expected, cell.BandLow, cell.BandHigh = binomialBand(n, math.Pow(randomFailShare, float64(m.p.Policy.MaxAttempts)), matrixSigmas)
	cell, err := m.backlog(cell, seed, o, n, m.longest(n, 0), nil)
	cell.Exhausted = cell.Product.DeadLetters["exhausted"]
	return cell, err
}

// join runs one replica for EnginesJoinFor, on a backlog it cannot drain
// in that time, against joinEngine kept full by the crowd started first.
func (m *matrix) join() (EngineCell, error) {
	o := joinEngine
	seed, cell := m.start(cellJoin, fmt.Sprintf("%d servers x %s, queue %d, kept full by %d clients of %d calls", o.Servers, o.ServiceTime, o.Queue, crowdClients, crowdInFlight), 1)
	o.Rand = seeded(seed, 0x901)
	cell.Capacity = capacityOf(o)
	srv, err := serveEngine(m.ctx, o)
	if err != nil {
		return cell, err
	}
	defer srv.Close()
	stopCrowd, err := startCrowd(m.ctx, srv.URL)
	if err != nil {
		return cell, err
	}
	wctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
	_ = srv.Await(wctx, func(st simengine.Stats) bool { return st.InSystem >= o.Servers+o.Queue })
	cancel()
	// Twice what the whole engine serves in the window: the replica never
	// runs out.
	n := int(2*cell.Capacity*m.cfg.EnginesJoinFor.Seconds()) + 100
	cell.Reads, cell.Traffic = n, fmt.Sprintf("backlog %d, for %s", n, m.cfg.EnginesJoinFor)
	run, err := m.drain(cellJoin, srv, traffic{backlog: n}, m.cfg.EnginesJoinFor, fleetSpec{replicas: 1, seed: seed})
	stopCrowd()
	if err != nil {
		return cell, err
	}
	// The engine's totals are the crowd's too: the replica's calls, sheds
	// and bills are counted from the ledger, within its run.
	from, to := run.started, run.started.Add(run.Elapsed)
	billed := map[bool]int{} // by whether the replica's
	run.Calls, run.Shed, run.ShedShare = 0, 0, 0
	for key, calls := range srv.Ledger() {
		_, ours := Index(key)
		if ours {
			run.Calls += int64(len(calls))
		}
		for _, c := range calls {
			if ours && c.Outcome == simengine.Shed {
				run.Shed++
			}
			if c.Outcome == simengine.Billed && !c.At.Before(from) && answered(c).Before(to) {
				billed[ours]++
			}
		}
	}
	run.Billed = int64(billed[true])
	if run.Calls > 0 {
		run.ShedShare = float64(run.Shed) / float64(run.Calls)
	}
	cell.Product = run
	if s := run.Elapsed.Seconds(); s > 0 {
		cell.ReplicaPerSec, cell.CrowdPerSec = float64(billed[true])/s, float64(billed[false])/s
	}
	return cell, nil
}

// startCrowd starts crowdClients plain HTTP sinks posting to url, each a
// closed loop of crowdInFlight calls, a call not answered 2xx made again
// after crowdPause. stop stops them and waits for them.
func startCrowd(ctx context.Context, url string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sinks []*downstream.HTTP
	stop = func() {
		cancel()
		wg.Wait()
		for _, s := range sinks {
			s.CloseIdle()
		}
	}
	for c := range crowdClients {
		sink, err := httpSink(url)
		if err != nil {
			stop()
			return nil, err
		}
		sinks = append(sinks, sink)
		for g := range crowdInFlight {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					read, _ := meter.Decode(Body(i))
					read.IdempotencyKey = fmt.Sprintf("crowd-%d-%d-%d", c, g, i)
					for ctx.Err() == nil && sink.Deliver(ctx, read) != nil {
						_ = retry.Sleep(ctx, crowdPause)
					}
				}
			})
		}
	}
	return stop, nil
}

// down drains a backlog with r replicas from an engine that answers every
// call 503 at once for EnginesDown from its first call.
func (m *matrix) down(r int) (EngineCell, error) {
	seed, cell := m.start(cellDown, fmt.Sprintf("down for %s (503 at once to every call), then %s", m.cfg.EnginesDown, uniformShape.Name), r)
	n := m.cfg.EnginesN
	var (
		once   sync.Once
		calls  atomic.Int64 // answered while down
		healed atomic.Int64 // when the engine came back, unix ns; 0 while down
	)
	o := uniformShape.options(seed)
	o.Refuse = func(string, int) (int, http.Header) {
		once.Do(func() { time.AfterFunc(m.cfg.EnginesDown, func() { healed.Store(time.Now().UnixNano()) }) })
		if healed.Load() == 0 {
			calls.Add(1)
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}
	return m.backlog(cell, seed, o, n, m.longest(n, m.cfg.EnginesDown+matrixRecovery), func(srv *simengine.Server, c *EngineCell) {
		c.DownCalls = calls.Load()
		billed, last := bills(srv.Ledger(), time.Time{})
		c.AllBilled = billed >= n
		if h := healed.Load(); h != 0 && c.AllBilled {
			c.Recovery = last.Sub(time.Unix(0, h))
		}
	})
}
