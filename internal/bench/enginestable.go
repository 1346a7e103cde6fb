package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
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
