package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// partialLateness is the lateness the partial scenario's retries should stay
// within, at the 99th percentile.
const partialLateness = 100 * time.Millisecond

// rows are the partial scenario's table rows, a group per latency shape and
// read mix.
func (p *Partial) rows() []Row {
	var rows []Row
	add := func(row Row) { rows = append(rows, row) }
	for _, x := range p.Rows {
		name := fmt.Sprintf("partial %s, %s reads, %d", x.Shape.Name, x.Mix.Name, p.N)
		b, o := x.Bare, x.Product
		add(Row{Scenario: name, Measure: "healthy reads billed/s, start to the last healthy read billed",
			Baseline: "bare client " + p.healthyGoodput(b), Ours: p.healthyGoodput(o), Ratio: ratio(x.Ratio),
			Target: fmt.Sprintf(">= %.1f", x.Target), Met: met(o.HealthyDone && x.Ratio >= x.Target)})
		add(Row{Scenario: name, Measure: "time to drain (every read settled)", Baseline: p.drain(b), Ours: p.drain(o)})
		add(Row{Scenario: name, Measure: "dead-lettered reads the engine would bill", Baseline: p.settledCount(b, b.BillableDeadLettered),
			Ours: p.settledCount(o, o.BillableDeadLettered), Target: "ours 0", Met: met(o.Drained && o.BillableDeadLettered == 0)})
		if x.Mix != healthyMix {
			add(Row{Scenario: name, Measure: "retry lateness past the delay asked, p50 / p90 / p99 (retries; not measured)",
				Baseline: lateness(b.Lateness), Ours: lateness(o.Lateness),
				Target: "ours p99 <= " + ms(partialLateness), Met: met(o.Lateness.Count > 0 && o.Lateness.P99 <= partialLateness)})
			add(Row{Scenario: name, Measure: "gap between a read's calls past the policy's ceiling, p50 / p90 / p99 (gaps)",
				Baseline: gaps(b.GapPastCeiling), Ours: gaps(o.GapPastCeiling)})
			add(Row{Scenario: name, Measure: fmt.Sprintf("calls of each always-503 read, min-max; dead-lettered of %d", o.AlwaysBad),
				Baseline: attempts(b), Ours: attempts(o), Target: fmt.Sprintf("%d-%d; all", p.MaxAttempts, p.MaxAttempts),
				Met: met(o.AlwaysCallsMin == p.MaxAttempts && o.AlwaysCallsMax == p.MaxAttempts && o.AlwaysDeadLettered == o.AlwaysBad)})
		}
		add(Row{Scenario: name, Measure: "adaptive limit, median of 100ms samples; breaker opened; retries spent / denied",
			Baseline: fmt.Sprintf("fixed %d", b.LimitMedian),
			Ours:     fmt.Sprintf("%d; %d; %d / %d", o.LimitMedian, o.BreakerOpened, o.RetriesSpent, o.RetriesDenied)})
		add(Row{Scenario: name, Measure: "engine latency of served calls p50 / p99; calls",
			Baseline: fmt.Sprintf("%s / %s; %d", ms(b.EngineP50), ms(b.EngineP99), b.Calls),
			Ours:     fmt.Sprintf("%s / %s; %d", ms(o.EngineP50), ms(o.EngineP99), o.Calls)})
	}
	return rows
}

// healthyGoodput is a variant's healthy goodput, marked when some healthy
// reads were not billed by the deadline.
func (p *Partial) healthyGoodput(r PartialRun) string {
	if !r.HealthyDone {
		return fmt.Sprintf("%s (stalled: %d of %d healthy billed in %s)", rate(r.Goodput), r.HealthyBilled, r.Healthy, p.Longest.Round(time.Second))
	}
	return rate(r.Goodput)
}

func (p *Partial) drain(r PartialRun) string {
	if !r.Drained {
		return fmt.Sprintf("did not drain in %s", p.Longest.Round(time.Second))
	}
	return ms(r.Elapsed)
}

// settledCount is a count of reads a variant settled in some way, marked
// when it did not settle them all: then the count is only a floor.
func (p *Partial) settledCount(r PartialRun, n int) string {
	if !r.Drained {
		return fmt.Sprintf("%d (did not drain)", n)
	}
	return fmt.Sprint(n)
}

func lateness(l Lateness) string {
	return fmt.Sprintf("%s / %s / %s (%d; %d)", ms(l.P50), ms(l.P90), ms(l.P99), l.Count, l.Missing)
}

func gaps(l Lateness) string {
	return fmt.Sprintf("%s / %s / %s (%d)", ms(l.P50), ms(l.P90), ms(l.P99), l.Count)
}

func attempts(r PartialRun) string {
	s := fmt.Sprintf("%d-%d; %d", r.AlwaysCallsMin, r.AlwaysCallsMax, r.AlwaysDeadLettered)
	if !r.Drained {
		s += " (did not drain)"
	}
	if len(r.Diagnostics) > 0 { // what explains a call beyond a read's attempts
		keys := slices.Sorted(maps.Keys(r.Diagnostics))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, r.Diagnostics[k])
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
