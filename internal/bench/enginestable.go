package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// rows are the engine matrix's table rows: per policy, per cell, a row per
// target (met yes or no) and a row of the state that explains it.
func (m *Engines) rows() []Row {
	var rows []Row
	for _, run := range m.Runs {
		for _, c := range run.Cells {
			rows = append(rows, c.rows(run.Policy)...)
		}
	}
	return rows
}

// rows are one cell's rows, judged by its kind's targets.
func (c EngineCell) rows(p EnginesPolicy) []Row {
	name := fmt.Sprintf("engines %s: %s, %d replica(s), %s", p.Name, c.Engine, c.Replicas, c.Traffic)
	var rows []Row
	add := func(r Row) {
		r.Scenario = name
		rows = append(rows, r)
	}
	pr := c.Product
	attempts := p.Policy.MaxAttempts
	switch c.Kind {
	case cellCapacity:
		over := pr.Goodput / c.Capacity
		add(Row{Measure: fmt.Sprintf("goodput / C (%.0f/s)", c.Capacity), Ours: fmt.Sprintf("%.2f C%s", over, notDrained(pr)),
			Target: fmt.Sprintf(">= %.1f C", matrixGoodput), Met: met(pr.Drained && over >= matrixGoodput)})
		add(Row{Measure: "calls shed", Ours: share(pr.Shed, pr.Calls), Target: fmt.Sprintf("<= %.0f%%", 100*matrixShed), Met: met(pr.ShedShare <= matrixShed)})
		add(c.deadLetteredRow())
		add(Row{Measure: "breaker opened", Ours: fmt.Sprint(pr.BreakerOpened), Target: "0", Met: met(pr.BreakerOpened == 0)})
	case cellHealthy:
		add(c.goodputRow("healthy reads billed/s, start to the last billed", "bare client "))
	case cellMix:
		if !c.Trickle {
			add(c.goodputRow("healthy reads billed/s, start to the last healthy read billed", "bare client "))
		}
		add(Row{Measure: fmt.Sprintf("calls of each always-503 read, min-max; dead-lettered exhausted, of %d", c.AlwaysBad),
			Ours:   fmt.Sprintf("%d-%d; %d%s", c.AlwaysCallsMin, c.AlwaysCallsMax, c.AlwaysExhausted, notDrained(pr)),
			Target: fmt.Sprintf("%d-%d; all", attempts, attempts), Met: met(attemptsMet(c.AlwaysCallsMin, c.AlwaysCallsMax, attempts, c.AlwaysExhausted, c.AlwaysBad))})
		add(Row{Measure: "429 reads (Retry-After: 1): next call after the 429, min / p50 / max (reads; missing)", Ours: gapsText(c.Recall),
			Target: fmt.Sprintf("%s-%s", secs(matrixRecallMin), secs(matrixRecallMax)), Met: met(c.Recall.within(matrixRecallMin, matrixRecallMax))})
		add(c.pausesRow())
		late := Row{Measure: "retry lateness past the delay asked, p50 / p90 / p99 (retries; not measured)", Ours: lateness(c.Lateness)}
		if !c.Trickle {
			late.Target, late.Met = "p99 <= "+ms(matrixLateness), met(c.Lateness.Count > 0 && c.Lateness.P99 <= matrixLateness)
		}
		add(late)
	case cellSwitch:
		r := c.goodputRow(fmt.Sprintf("second phase: billed/s from 1s after the switch (at %s) to the last bill", ms(c.SwitchAfter)),
			"bare client on the long tail ")
		if c.SwitchAfter == 0 {
			r.Ours, r.Met = "no switch (the deadline came first)", met(false)
		}
		add(r)
	case cellAccount:
		if !c.Trickle {
			add(c.goodputRow("the other reads billed/s, start to the last billed", "bare client "))
		}
		add(Row{Measure: "the account's reads: next call after the 429, min / p50 / max (reads; missing)", Ours: gapsText(c.Recall),
			Target: fmt.Sprintf(">= %s (60s clamped by max_server_wait)", secs(c.WaitFloor)), Met: met(c.Recall.within(c.WaitFloor, 0))})
		add(c.pausesRow())
	case cellRandom:
		add(Row{Measure: "pauses; breaker opened", Ours: fmt.Sprintf("%d; %d", pr.Pauses, pr.BreakerOpened), Target: "0; 0",
			Met: met(pr.Pauses == 0 && pr.BreakerOpened == 0)})
		limitShare := 0.0
		if c.LimitBound > 0 {
			limitShare = float64(pr.LimitMedian) / float64(c.LimitBound)
		}
		add(Row{Measure: "adaptive limit: median of 100ms samples / its bound", Ours: fmt.Sprintf("%d / %d", pr.LimitMedian, c.LimitBound),
			Ratio: ratio(limitShare), Target: fmt.Sprintf(">= %.1f", matrixLimitShare), Met: met(limitShare >= matrixLimitShare)})
		add(Row{Measure: fmt.Sprintf("reads dead-lettered exhausted; chance: %d x %.1f^%d, %dσ band", c.Reads, randomFailShare, attempts, matrixSigmas),
			Baseline: fmt.Sprintf("expected %.1f (%.1f-%.1f)", c.Expected, c.BandLow, c.BandHigh), Ours: fmt.Sprintf("%d%s", c.Exhausted, notDrained(pr)),
			Target: "inside the band", Met: met(pr.Drained && inBand(c.Exhausted, c.BandLow, c.BandHigh))})
	case cellJoin:
		add(Row{Measure: "breaker opened", Ours: fmt.Sprint(pr.BreakerOpened), Target: "0", Met: met(pr.BreakerOpened == 0)})
		fair := c.Capacity / (crowdClients + 1)
		add(Row{Measure: fmt.Sprintf("the replica's billed/s against its fair share C/%d", crowdClients+1),
			Baseline: fmt.Sprintf("C/%d %s; the %d clients %s", crowdClients+1, rate(fair), crowdClients, rate(c.CrowdPerSec)),
			Ours:     rate(c.ReplicaPerSec), Ratio: ratio(c.ReplicaPerSec / fair),
			Target: fmt.Sprintf(">= %.1f (the bench's bar)", matrixJoinShare), Met: met(c.ReplicaPerSec >= matrixJoinShare*fair)})
	case cellDown:
		add(c.deadLetteredRow())
		add(Row{Measure: "calls while down", Ours: fmt.Sprint(c.DownCalls)})
		recovered := "not all billed"
		if c.AllBilled {
			recovered = ms(c.Recovery)
		}
		add(Row{Measure: "every read billed: the last bill after the engine's return", Ours: recovered,
			Target: "<= " + secs(matrixRecovery), Met: met(c.AllBilled && c.Recovery <= matrixRecovery)})
	}
	add(Row{Measure: "breaker opened; pauses; limit median / bound; retries spent / denied; shed; dead-lettered; diagnostics",
		Ours: fmt.Sprintf("%d; %d; %d / %d; %d / %d; %s; %s; %s", pr.BreakerOpened, pr.Pauses, pr.LimitMedian, c.LimitBound,
			pr.RetriesSpent, pr.RetriesDenied, share(pr.Shed, pr.Calls), byReason(pr), diagnostics(pr.Diagnostics))})
	return rows
}

// goodputRow judges the product's goodput against the bare client's.
func (c EngineCell) goodputRow(measure, bare string) Row {
	r, ok := goodputRatio(c.Goodput, c.BareGoodput, c.GoodputDone, c.BareDone, matrixGoodput)
	return Row{Measure: measure, Baseline: bare + stalled(c.BareGoodput, c.BareDone), Ours: stalled(c.Goodput, c.GoodputDone),
		Ratio: ratio(r), Target: fmt.Sprintf(">= %.1f", matrixGoodput), Met: met(ok)}
}

func (c EngineCell) pausesRow() Row {
	return Row{Measure: "pauses (engine_pauses_total)", Ours: fmt.Sprint(c.Product.Pauses), Target: "0", Met: met(c.Product.Pauses == 0)}
}

func (c EngineCell) deadLetteredRow() Row {
	pr := c.Product
	return Row{Measure: "dead-lettered", Ours: byReason(pr) + notDrained(pr), Target: "0", Met: met(pr.Drained && pr.deadLettered() == 0)}
}

// stalled is a goodput, marked when some healthy read was not billed.
func stalled(v float64, done bool) string {
	if !done {
		return rate(v) + " (not all billed)"
	}
	return rate(v)
}

// notDrained marks a figure of a fleet stopped before every read settled.
func notDrained(r FleetRun) string {
	if !r.Drained {
		return fmt.Sprintf(" (not drained in %s)", r.Elapsed.Round(time.Second))
	}
	return ""
}

func gapsText(g Gaps) string {
	return fmt.Sprintf("%s / %s / %s (%d; %d)", ms(g.Min), ms(g.P50), ms(g.Max), g.Count, g.Missing)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// byReason is a fleet's dead-lettered reads, with their reasons.
func byReason(r FleetRun) string {
	if r.deadLettered() == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", r.deadLettered(), diagnostics(r.DeadLetters))
}

// diagnostics are a fleet's diagnostic counters, sorted, or "none".
func diagnostics(d map[string]int) string {
	if len(d) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(d))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, d[k])
	}
	return strings.Join(parts, ", ")
}

func lateness(l Lateness) string {
	return fmt.Sprintf("%s / %s / %s (%d; %d)", ms(l.P50), ms(l.P90), ms(l.P99), l.Count, l.Missing)
}

// The engine matrix's targets, as numbers: each cell's rows judge its
// figures with these.
const (
	// matrixGoodput is the share of a bare client's healthy goodput the
	// product should reach, and of C a fleet against the capacity engine.
	matrixGoodput = 0.9
	// matrixShed is the most of its calls a fleet may see shed against the
	// capacity engine.
	matrixShed = 0.1
	// matrixLateness bounds the retries' lateness at the 99th percentile.
	matrixLateness = 100 * time.Millisecond
	// matrixRecallMin and matrixRecallMax bound the gap from a 429 with
	// Retry-After: 1 to its read's next call.
	matrixRecallMin = time.Second
	matrixRecallMax = 1500 * time.Millisecond
	// matrixLimitShare is the least share of its bound the fleet's limit
	// should hold (its median) against an engine that fails calls at random
	// whatever the load.
	matrixLimitShare = 0.9
	// matrixSigmas is the width of the binomial band around the reads
	// expected exhausted by chance, in standard deviations.
	matrixSigmas = 3
	// matrixJoinShare is the least share of its fair share (C over the
	// clients and the replica) a replica joining a full engine should bill:
	// the bench's bar, not the issue's.
	matrixJoinShare = 0.5
	// matrixRecovery is how soon after an outage ends every read should be
	// billed.
	matrixRecovery = 5 * time.Second
)

// longestChain is the most a read that fails every attempt may wait
// between its first call and its last: the sum of the policy's ceilings
// after attempts 1 to MaxAttempts-1 (15.5s for the production policy).
func longestChain(p retry.Policy) time.Duration {
	var d time.Duration
	for a := 1; a < p.MaxAttempts; a++ {
		d += p.Ceiling(uint64(a))
	}
	return d
}

// binomialBand is the mean of a binomial of n trials of chance p, and the
// band of k standard deviations either side of it, its low end at least 0.
func binomialBand(n int, p, k float64) (mean, lo, hi float64) {
	mean = float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return mean, max(0, mean-k*sd), mean + k*sd
}

// inBand reports whether a count lies in [lo, hi].
func inBand(v int, lo, hi float64) bool {
	return float64(v) >= lo && float64(v) <= hi
}

// Gaps are the gaps of a set of reads from their first call's answer to
// their second call: Count measured, Missing not (a read called once).
type Gaps struct {
	Count   int           `json:"count"`
	Missing int           `json:"missing"`
	Min     time.Duration `json:"min_ns"`
	P50     time.Duration `json:"p50_ns"`
	Max     time.Duration `json:"max_ns"`
}

// within reports whether there is a gap, none is missing, and every one is
// in [lo, hi] (hi 0: no upper bound).
func (g Gaps) within(lo, hi time.Duration) bool {
	return g.Count > 0 && g.Missing == 0 && g.Min >= lo && (hi == 0 || g.Max <= hi)
}

// recallGaps are the gaps of the reads of kind k (by index into kinds; read
// i's key is Key(i)): from the answer of each one's first call to its
// second.
func recallGaps(ledger map[string][]simengine.Call, kinds []readKind, k readKind) Gaps {
	var ds []time.Duration
	missing := 0
	for i, kind := range kinds {
		if kind != k {
			continue
		}
		calls := ledger[Key(i)]
		if len(calls) < 2 {
			missing++
			continue
		}
		ds = append(ds, calls[1].At.Sub(answered(calls[0])))
	}
	g := Gaps{Count: len(ds), Missing: missing}
	if len(ds) > 0 {
		slices.Sort(ds)
		g.Min, g.P50, g.Max = ds[0], ds[len(ds)/2], ds[len(ds)-1]
	}
	return g
}

// goodputRatio is the product's goodput over the bare client's, and whether
// it met target: both billed every healthy read, and the ratio reached it.
func goodputRatio(product, bare float64, productDone, bareDone bool, target float64) (float64, bool) {
	if bare <= 0 {
		return 0, false
	}
	r := product / bare
	return r, productDone && bareDone && r >= target
}

// attemptsMet reports whether every always-failing read was called exactly
// attempts times and all of them were dead-lettered exhausted.
func attemptsMet(callsMin, callsMax, attempts, exhausted, total int) bool {
	return total > 0 && callsMin == attempts && callsMax == attempts && exhausted == total
}

// billedFrom is the healthy goodput of a phase that starts at from: the
// bills answered at or after from, over the time from from to the last of
// them. A phase billed entirely before from is measured from start instead
// (a run too small to measure past its first second).
func billedFrom(ledger map[string][]simengine.Call, start, from time.Time) (billed int, perSec float64) {
	n, last := bills(ledger, from)
	if n == 0 {
		from = start
		n, last = bills(ledger, from)
	}
	if n == 0 || !last.After(from) {
		return n, 0
	}
	return n, float64(n) / last.Sub(from).Seconds()
}

// bills counts the bills of the ledger answered at or after since, and
// says when the last of them was (zero for none).
func bills(ledger map[string][]simengine.Call, since time.Time) (n int, last time.Time) {
	for _, calls := range ledger {
		for _, c := range calls {
			if at := answered(c); c.Outcome == simengine.Billed && !at.Before(since) {
				n++
				if at.After(last) {
					last = at
				}
			}
		}
	}
	return n, last
}
