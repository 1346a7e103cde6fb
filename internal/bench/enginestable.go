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

// The engine matrix's targets, as numbers.
const (
	matrixGoodput    = 0.9                     // of the bare client's healthy goodput, and of C against the capacity engine
	matrixShed       = 0.1                     // the most of its calls a fleet may see shed by the capacity engine
	matrixLateness   = 100 * time.Millisecond  // the most the retries may be late at p99
	matrixRecallMin  = time.Second             // the least gap from a 429 with Retry-After: 1 to the next call
	matrixRecallMax  = 1500 * time.Millisecond // the most
	matrixLimitShare = 0.9                     // of its bound the limit's median should hold against random failures
	matrixSigmas     = 3                       // standard deviations either side of the reads expected exhausted by chance
	// matrixJoinShare is the least share of its fair share (C over the
	// clients and the replica) a replica joining a full engine should bill:
	// the bench's bar, not the issue's.
	matrixJoinShare = 0.5
	matrixRecovery  = 5 * time.Second // the most from an outage's end to every read billed
)

// rows are the engine matrix's table rows, per policy and cell.
func (m *Engines) rows() []Row {
	var rows []Row
	for _, run := range m.Runs {
		for _, c := range run.Cells {
			rows = append(rows, c.rows(run.Policy)...)
		}
	}
	return rows
}

// rows are one cell's rows: a row per target of its kind (met yes or no),
// then the state that explains them.
func (c EngineCell) rows(p EnginesPolicy) []Row {
	pr := c.Product
	rows := append(c.targets(p.Policy.MaxAttempts), Row{
		Measure: "breaker opened; pauses; limit median / bound; retries spent / denied; shed; dead-lettered; diagnostics",
		Ours: fmt.Sprintf("%d; %d; %d / %d; %d / %d; %s; %s; %s", pr.BreakerOpened, pr.Pauses, pr.LimitMedian, c.LimitBound,
			pr.RetriesSpent, pr.RetriesDenied, share(pr.Shed, pr.Calls), byReason(pr), diagnostics(pr.Diagnostics))})
	for i := range rows {
		rows[i].Scenario = fmt.Sprintf("engines %s: %s, %d replica(s), %s", p.Name, c.Engine, c.Replicas, c.Traffic)
	}
	return rows
}

// targets are the rows of the cell's kind: a row per target, and the
// figures that explain them.
func (c EngineCell) targets(attempts int) []Row {
	pr := c.Product
	pauses := judged("pauses (engine_pauses_total)", fmt.Sprint(pr.Pauses), "0", pr.Pauses == 0)
	breaker := judged("breaker opened", fmt.Sprint(pr.BreakerOpened), "0", pr.BreakerOpened == 0)
	dead := judged("dead-lettered", byReason(pr)+notDrained(pr), "0", pr.Drained && pr.deadLettered() == 0)
	switch c.Kind {
	case cellCapacity:
		over := pr.Goodput / c.Capacity
		return []Row{judged(fmt.Sprintf("goodput / C (%.0f/s)", c.Capacity), fmt.Sprintf("%.2f C%s", over, notDrained(pr)),
			fmt.Sprintf(">= %.1f C", matrixGoodput), pr.Drained && over >= matrixGoodput),
			judged("calls shed", share(pr.Shed, pr.Calls), fmt.Sprintf("<= %.0f%%", 100*matrixShed), pr.ShedShare <= matrixShed),
			dead, breaker}
	case cellHealthy:
		return c.goodput("healthy reads billed/s, start to the last billed", "bare client ")
	case cellMix:
		late := Row{Measure: "retry lateness past the delay asked, p50 / p90 / p99 (retries; not measured)",
			Ours: fmt.Sprintf("%s / %s / %s (%d; %d)", ms(c.Lateness.P50), ms(c.Lateness.P90), ms(c.Lateness.P99), c.Lateness.Count, c.Lateness.Missing)}
		if !c.Trickle { // a trickle's retries are not judged late
			late = judged(late.Measure, late.Ours, "p99 <= "+ms(matrixLateness), c.Lateness.Count > 0 && c.Lateness.P99 <= matrixLateness)
		}
		return append(c.goodput("healthy reads billed/s, start to the last healthy read billed", "bare client "),
			judged(fmt.Sprintf("calls of each always-503 read, min-max; dead-lettered exhausted, of %d", c.AlwaysBad),
				fmt.Sprintf("%d-%d; %d%s", c.AlwaysCallsMin, c.AlwaysCallsMax, c.AlwaysExhausted, notDrained(pr)), fmt.Sprintf("%d-%d; all", attempts, attempts),
				c.AlwaysBad > 0 && c.AlwaysCallsMin == attempts && c.AlwaysCallsMax == attempts && c.AlwaysExhausted == c.AlwaysBad),
			judged("429 reads (Retry-After: 1): next call after the 429, min / p50 / max (reads; missing)", c.Recall.String(),
				fmt.Sprintf("%s-%s", secs(matrixRecallMin), secs(matrixRecallMax)), c.Recall.within(matrixRecallMin, matrixRecallMax)),
			pauses, late)
	case cellSwitch:
		rows := c.goodput(fmt.Sprintf("second phase: billed/s from 1s after the switch (at %s) to the last bill", ms(c.SwitchAfter)),
			"bare client on the long tail ")
		if c.SwitchAfter == 0 {
			rows[0].Ours, rows[0].Met = "no switch (the deadline came first)", met(false)
		}
		return rows
	case cellAccount:
		return append(c.goodput("the other reads billed/s, start to the last billed", "bare client "),
			judged("the account's reads: next call after the 429, min / p50 / max (reads; missing)", c.Recall.String(),
				fmt.Sprintf(">= %s (60s clamped by max_server_wait)", secs(c.WaitFloor)), c.Recall.within(c.WaitFloor, 0)),
			pauses)
	case cellRandom:
		held := 0.0
		if c.LimitBound > 0 {
			held = float64(pr.LimitMedian) / float64(c.LimitBound)
		}
		limit := judged("adaptive limit: median of 100ms samples / its bound", fmt.Sprintf("%d / %d", pr.LimitMedian, c.LimitBound),
			fmt.Sprintf(">= %.1f", matrixLimitShare), held >= matrixLimitShare)
		limit.Ratio = ratio(held)
		band := judged(fmt.Sprintf("reads dead-lettered exhausted; chance: %d x %.1f^%d, %dσ band", c.Reads, randomFailShare, attempts, matrixSigmas),
			fmt.Sprintf("%d%s", c.Exhausted, notDrained(pr)), "inside the band", pr.Drained && inBand(c.Exhausted, c.BandLow, c.BandHigh))
		band.Baseline = fmt.Sprintf("expected %.1f (%.1f-%.1f)", c.Expected, c.BandLow, c.BandHigh)
		return []Row{judged("pauses; breaker opened", fmt.Sprintf("%d; %d", pr.Pauses, pr.BreakerOpened), "0; 0", pr.Pauses == 0 && pr.BreakerOpened == 0),
			limit, band}
	case cellJoin:
		fair := c.Capacity / (crowdClients + 1)
		share := judged(fmt.Sprintf("the replica's billed/s against its fair share C/%d", crowdClients+1), rate(c.ReplicaPerSec),
			fmt.Sprintf(">= %.1f (the bench's bar)", matrixJoinShare), c.ReplicaPerSec >= matrixJoinShare*fair)
		share.Baseline, share.Ratio = fmt.Sprintf("C/%d %s; the %d clients %s", crowdClients+1, rate(fair), crowdClients, rate(c.CrowdPerSec)), ratio(c.ReplicaPerSec/fair)
		return []Row{breaker, share}
	case cellDown:
		recovered := "not all billed"
		if c.AllBilled {
			recovered = ms(c.Recovery)
		}
		// Few calls: fewer while the engine was down than the reads there
		// were to call, a call a read at most (the "few", read).
		return []Row{dead, judged("calls while down", fmt.Sprint(c.DownCalls), fmt.Sprintf("< %d (the reads)", c.Reads), c.DownCalls < int64(c.Reads)),
			judged("every read billed: the last bill after the engine's return", recovered, "<= "+secs(matrixRecovery), c.AllBilled && c.Recovery <= matrixRecovery)}
	}
	return nil
}

// judged is the row of a target: what it measures, what the cell did, the
// target and whether it was met.
func judged(measure, ours, target string, ok bool) Row {
	return Row{Measure: measure, Ours: ours, Target: target, Met: met(ok)}
}

// goodput is the row judging the product's goodput against the bare
// client's (baseline names it): met when both billed every healthy read
// and the ratio reached matrixGoodput. A trickle has no bare client, and
// no such row.
func (c EngineCell) goodput(measure, baseline string) []Row {
	if c.Trickle {
		return nil
	}
	r := 0.0
	if c.BareGoodput > 0 {
		r = c.Goodput / c.BareGoodput
	}
	return []Row{{Measure: measure, Baseline: baseline + stalled(c.BareGoodput, c.BareDone), Ours: stalled(c.Goodput, c.GoodputDone),
		Ratio: ratio(r), Target: fmt.Sprintf(">= %.1f", matrixGoodput), Met: met(c.BareGoodput > 0 && c.GoodputDone && c.BareDone && r >= matrixGoodput)}}
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
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, d[k]))
	}
	return strings.Join(parts, ", ")
}

// longestChain is the most a read that fails every attempt may wait
// between its first call and its last: the sum of the policy's ceilings
// after attempts 1 to MaxAttempts-1 (15.5s for the production policy).
func longestChain(p retry.Policy) (d time.Duration) {
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
func inBand(v int, lo, hi float64) bool { return float64(v) >= lo && float64(v) <= hi }

// Gaps are the gaps of a set of reads from their first call's answer to
// their second call: Count measured, Missing not (a read called once).
type Gaps struct {
	Count   int           `json:"count"`
	Missing int           `json:"missing"`
	Min     time.Duration `json:"min_ns"`
	P50     time.Duration `json:"p50_ns"`
	Max     time.Duration `json:"max_ns"`
}

// String is g as the table shows it.
func (g Gaps) String() string {
	return fmt.Sprintf("%s / %s / %s (%d; %d)", ms(g.Min), ms(g.P50), ms(g.Max), g.Count, g.Missing)
}

// within reports whether there is a gap, none is missing, and every one is
// in [lo, hi] (hi 0: no upper bound).
func (g Gaps) within(lo, hi time.Duration) bool {
	return g.Count > 0 && g.Missing == 0 && g.Min >= lo && (hi == 0 || g.Max <= hi)
}

// recallGaps are the gaps of the reads of kind k (read i is kinds[i], its
// key Key(i)).
func recallGaps(ledger map[string][]simengine.Call, kinds []readKind, k readKind) Gaps {
	var ds []time.Duration
	var g Gaps
	for i, kind := range kinds {
		switch calls := ledger[Key(i)]; {
		case kind != k:
		case len(calls) < 2:
			g.Missing++
		default:
			ds = append(ds, calls[1].At.Sub(answered(calls[0])))
		}
	}
	if g.Count = len(ds); g.Count > 0 {
		slices.Sort(ds)
		g.Min, g.P50, g.Max = ds[0], ds[len(ds)/2], ds[len(ds)-1]
	}
	return g
}

// billedFrom is the healthy goodput of a phase that starts at from: the
// bills answered at or after from, over the time from from to the last of
// them. A phase billed entirely before from is measured from start instead
// (a run too small to measure past its first second).
func billedFrom(ledger map[string][]simengine.Call, start, from time.Time) float64 {
	n, last := bills(ledger, from)
	if n == 0 {
		from = start
		n, last = bills(ledger, from)
	}
	if n == 0 || !last.After(from) {
		return 0
	}
	return float64(n) / last.Sub(from).Seconds()
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
