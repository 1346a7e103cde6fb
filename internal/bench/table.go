package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Row is one line of the report's table: a figure of the baseline and of
// ours, their ratio where it means something, and the target.
type Row struct {
	Scenario string `json:"scenario"`
	Measure  string `json:"measure"`
	Baseline string `json:"baseline"`
	Ours     string `json:"ours"`
	Ratio    string `json:"ratio"`
	Target   string `json:"target"`
	Met      string `json:"met"` // yes, no, or empty without a target
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func runs(v []float64) string {
	out := ""
	for i, x := range v {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.0f", x)
	}
	return out
}

func rate(v float64) string   { return fmt.Sprintf("%.0f/s", v) }
func micros(v float64) string { return fmt.Sprintf("%.2f µs", v) }
func ratio(v float64) string  { return fmt.Sprintf("%.2f", v) }
func mib(b int64) string      { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1e3)
}

// Rows flattens the report into table rows, scenario by scenario.
func (r *Report) Rows() []Row {
	var rows []Row
	add := func(row Row) { rows = append(rows, row) }
	if o := r.Overhead; o != nil {
		for _, x := range o.Rows {
			name := fmt.Sprintf("overhead pull %d", x.Pull)
			if x.Breaker {
				name += " +breaker"
			}
			add(Row{Scenario: name, Measure: "msgs/s, best of 2", Baseline: "bare " + rate(x.Bare.MsgsPerSec),
				Ours: rate(x.Ours.MsgsPerSec), Ratio: ratio(x.Ratio), Target: ">= 0.85", Met: met(x.Ratio >= 0.85)})
			add(Row{Scenario: name, Measure: "process CPU/msg (server incl.)", Baseline: micros(x.Bare.CPUMicros),
				Ours: micros(x.Ours.CPUMicros), Ratio: ratio(x.Ours.CPUMicros / x.Bare.CPUMicros)})
			add(Row{Scenario: name, Measure: "vs bare fan-out to 32 acking goroutines", Baseline: "fan-out " + rate(x.FanOut.MsgsPerSec) + ", " + micros(x.FanOut.CPUMicros),
				Ours: rate(x.Ours.MsgsPerSec), Ratio: ratio(x.Ours.MsgsPerSec / x.FanOut.MsgsPerSec)})
			if d := x.FanOutDecode; d.MsgsPerSec > 0 {
				add(Row{Scenario: name, Measure: "vs the fan-out also parsing metadata and decoding each read", Baseline: "fan-out decoding " + rate(d.MsgsPerSec) + ", " + micros(d.CPUMicros),
					Ours: rate(x.Ours.MsgsPerSec), Ratio: ratio(x.Ours.MsgsPerSec / d.MsgsPerSec)})
				add(Row{Scenario: name, Measure: "the fan-out decoding vs the bare loop (the cost of the work no consumer skips)", Baseline: "bare " + rate(x.Bare.MsgsPerSec),
					Ours: "fan-out decoding " + rate(d.MsgsPerSec), Ratio: ratio(d.MsgsPerSec / x.Bare.MsgsPerSec)})
			}
			if stall := max(x.Bare.Stall, x.FanOut.Stall, x.FanOutDecode.Stall, x.Ours.Stall); stall >= time.Second {
				add(Row{Scenario: name, Measure: "longest ack-floor stall in a run", Baseline: fmt.Sprintf("bare %s, fan-out %s, fan-out decoding %s", ms(x.Bare.Stall), ms(x.FanOut.Stall), ms(x.FanOutDecode.Stall)),
					Ours: ms(x.Ours.Stall)})
			}
		}
	}
	if h := r.HTTP; h != nil {
		name := fmt.Sprintf("http end to end, %d reads", h.N)
		add(Row{Scenario: name, Measure: fmt.Sprintf("msgs/s, best of %d; ours: adaptive limit on (limit at the end %d)", len(h.Ours.Runs), h.Limit),
			Baseline: "bare client " + rate(h.Bare.MsgsPerSec), Ours: rate(h.Ours.MsgsPerSec), Ratio: ratio(h.Ratio), Target: ">= 0.8", Met: met(h.Ratio >= 0.8)})
		add(Row{Scenario: name, Measure: "ours with the limit and budget off (diagnostic)", Baseline: "bare client " + rate(h.Bare.MsgsPerSec),
			Ours: rate(h.Fixed.MsgsPerSec), Ratio: ratio(h.FixedRatio)})
		add(Row{Scenario: name, Measure: "every run, msgs/s", Baseline: runs(h.Bare.Runs), Ours: runs(h.Ours.Runs) + "; off " + runs(h.Fixed.Runs)})
		add(Row{Scenario: name, Measure: "process CPU/msg (server incl.); ratio: ours with the limit off", Baseline: micros(h.Bare.CPUMicros),
			Ours: micros(h.Ours.CPUMicros) + "; off " + micros(h.Fixed.CPUMicros), Ratio: ratio(h.Fixed.CPUMicros / h.Bare.CPUMicros)})
		if stall := max(h.Bare.Stall, h.Ours.Stall, h.Fixed.Stall); stall >= time.Second {
			add(Row{Scenario: name, Measure: "longest ack-floor stall in a run", Baseline: "n/a (no durable)", Ours: ms(h.Ours.Stall) + "; off " + ms(h.Fixed.Stall)})
		}
	}
	if s := r.Storm; s != nil {
		name := fmt.Sprintf("storm %d x 503", s.N)
		add(Row{Scenario: name, Measure: "redeliveries: peak/mean per 100ms over the 2s band",
			Baseline: "fixed 2s " + ratio(s.Fixed.Spread.PeakOverMean), Ours: "jitter " + ratio(s.Jitter.Spread.PeakOverMean),
			Target: "ours <= 1.5, fixed >= 5", Met: met(s.Jitter.Spread.PeakOverMean <= 1.5 && s.Fixed.Spread.PeakOverMean >= 5)})
		add(Row{Scenario: name, Measure: "busiest 100ms (mean)", Baseline: fmt.Sprintf("%d (%.0f)", s.Fixed.Spread.Peak, s.Fixed.Spread.Mean),
			Ours: fmt.Sprintf("%d (%.0f)", s.Jitter.Spread.Peak, s.Jitter.Spread.Mean)})
		add(Row{Scenario: name, Measure: "first failed pass", Baseline: ms(s.Fixed.FirstPass), Ours: ms(s.Jitter.FirstPass)})
		add(Row{Scenario: name, Measure: "time to drain", Baseline: ms(s.Fixed.Drain), Ours: ms(s.Jitter.Drain)})
	}
	if s := r.Steady; s != nil {
		name := fmt.Sprintf("steady %d/s, 20%% fail once", s.Rate)
		add(Row{Scenario: name, Measure: "redeliveries: peak/mean per 100ms over the due band",
			Baseline: "NakWithDelay " + ratio(s.ServerSide.Spread.PeakOverMean), Ours: "held " + ratio(s.Held.Spread.PeakOverMean),
			Target: "ours <= 2", Met: met(s.Held.Spread.PeakOverMean <= 2)})
		add(Row{Scenario: name, Measure: "lateness p50", Baseline: ms(s.ServerSide.Late.P50), Ours: ms(s.Held.Late.P50)})
		add(Row{Scenario: name, Measure: "lateness p99", Baseline: ms(s.ServerSide.Late.P99), Ours: ms(s.Held.Late.P99),
			Target: "ours <= 100 ms", Met: met(s.Held.Late.P99 <= 100*time.Millisecond)})
		add(Row{Scenario: name, Measure: "failed reads measured (missing)",
			Baseline: fmt.Sprintf("%d (%d)", s.ServerSide.Failed, s.ServerSide.Missing), Ours: fmt.Sprintf("%d (%d)", s.Held.Failed, s.Held.Missing)})
	}
	if m := r.Memory; m != nil {
		c := m.Child
		name := fmt.Sprintf("memory, binary drains %d", c.N)
		if c.Skipped != "" {
			add(Row{Scenario: "memory, binary", Measure: "skipped: " + c.Skipped})
		} else {
			add(Row{Scenario: name, Measure: "VmHWM of the child", Ours: mib(c.HWM), Target: "<= 64 MiB", Met: met(c.HWM <= 64<<20)})
			add(Row{Scenario: name, Measure: "VmRSS sampled: first, peak", Ours: mib(c.FirstRSS) + ", " + mib(c.PeakRSS)})
			add(Row{Scenario: name, Measure: "drain rate (exit after SIGTERM)", Ours: rate(c.MsgsPerSec) + " (" + c.Exit + ")"})
			add(Row{Scenario: name, Measure: "publish the backlog first; longest ack-floor stall", Ours: ms(c.Publish) + "; " + ms(c.Stall)})
		}
		h := m.Heap
		name = fmt.Sprintf("memory, in process %d", h.N)
		add(Row{Scenario: name, Measure: "HeapInuse peak (server incl.)", Baseline: "bare " + mib(int64(h.Bare.Peak)), Ours: mib(int64(h.Ours.Peak)),
			Ratio: ratio(float64(h.Ours.Peak) / float64(h.Bare.Peak))})
		add(Row{Scenario: name, Measure: "HeapInuse peak - before", Baseline: mib(int64(h.Bare.Peak) - int64(h.Bare.Before)),
			Ours: mib(int64(h.Ours.Peak) - int64(h.Ours.Before))})
	}
	if a := r.Audit; a != nil {
		name := fmt.Sprintf("audit, binary audits %d", a.N)
		if a.Skipped != "" {
			add(Row{Scenario: "audit, binary", Measure: "skipped: " + a.Skipped})
		} else {
			add(Row{Scenario: name, Measure: "time; reads/s", Ours: ms(a.Took) + "; " + rate(a.ReadsPerSec)})
			add(Row{Scenario: name, Measure: "VmHWM of the child", Ours: mib(a.HWM)})
			add(Row{Scenario: name, Measure: fmt.Sprintf("planted: %d deleted, %d unbilled, %d extra keys; %d dead-lettered", auditDeleted, auditUnbilled, auditExtra, a.DeadLettered),
				Ours: fmt.Sprintf("exit %d, %v", a.Exit, a.Findings), Target: "each found, nothing else", Met: met(a.Exact)})
		}
	}
	if s := r.Scaling; s != nil {
		for _, x := range s.Rows {
			split := ""
			if x.Split != nil {
				split = fmt.Sprintf(", server %.0f%% consumers %.0f%% other %.0f%%", 100*x.Split[sideServer], 100*x.Split[sideConsumer], 100*x.Split["other"])
			}
			add(Row{Scenario: fmt.Sprintf("scaling %d instance(s)", x.Instances), Measure: "msgs/s; vs 1 instance",
				Ours: rate(x.MsgsPerSec), Ratio: ratio(x.Speedup)})
			add(Row{Scenario: fmt.Sprintf("scaling %d instance(s)", x.Instances), Measure: "CPU",
				Ours: fmt.Sprintf("busy %.0f%% of %d CPUs, %.2f µs/msg%s", 100*x.CPUBusy, s.CPUs, x.CPUMicros, split)})
		}
	}
	if c := r.Capacity; c != nil {
		for _, x := range c.Rows {
			name := fmt.Sprintf("capacity %d replica(s)", x.Replicas)
			a, f := x.Adaptive, x.Fixed
			add(Row{Scenario: name, Measure: fmt.Sprintf("goodput / C (%.0f/s); drain / ideal (%s)", c.Engine.Capacity, ms(c.Ideal)),
				Baseline: "fixed " + goodput(f, c.Longest), Ours: goodput(a, c.Longest),
				Target: ">= 0.9 C", Met: met(a.Drained && a.GoodputOverC >= 0.9)})
			add(Row{Scenario: name, Measure: "calls the engine rejected (503)", Baseline: share(f.Shed, f.Calls), Ours: share(a.Shed, a.Calls),
				Target: "<= 10%", Met: met(a.ShedShare <= 0.1)})
			add(Row{Scenario: name, Measure: fmt.Sprintf("engine p99 latency / unloaded (%s); p50", ms(c.Engine.ServiceTime)),
				Baseline: latencies(f), Ours: latencies(a), Target: "<= 2x", Met: met(a.P99OverService <= 2)})
			add(Row{Scenario: name, Measure: "dead-lettered (all for overload)", Baseline: deadLetters(f), Ours: deadLetters(a),
				Target: "ours 0", Met: met(a.deadLettered() == 0)})
			add(Row{Scenario: name, Measure: "breaker opened; retries spent / denied; fleet limit (median sum)",
				Baseline: fleetState(f), Ours: fleetState(a)})
			add(Row{Scenario: name, Measure: "engine: mean busy servers / in system; peak calls per 100ms; durable's peak ack pending",
				Baseline: engineState(f), Ours: engineState(a)})
		}
	}
	if c := r.CycleOpen; c != nil {
		perWindow := c.Engine.Capacity * spreadWindow.Seconds()
		for _, x := range c.Rows {
			name := fmt.Sprintf("cycle-open %d replica(s)", x.Replicas)
			a, f := x.Adaptive, x.Fixed
			add(Row{Scenario: name, Measure: fmt.Sprintf("peak calls in 100ms / capacity per 100ms (%.0f)", perWindow),
				Baseline: fmt.Sprintf("fixed %d (%.2fx)", f.Peak, f.PeakOverCapacity), Ours: fmt.Sprintf("%d (%.2fx)", a.Peak, a.PeakOverCapacity)})
			add(Row{Scenario: name, Measure: fmt.Sprintf("calls rejected in the first %s", c.Window),
				Baseline: share(int64(f.Shed), int64(f.Calls)), Ours: share(int64(a.Shed), int64(a.Calls))})
			add(Row{Scenario: name, Measure: fmt.Sprintf("billed in the first %s / C", c.Window),
				Baseline: ratio(f.GoodputOverC) + " C", Ours: ratio(a.GoodputOverC) + " C"})
		}
	}
	if b := r.RetryBudget; b != nil {
		name := fmt.Sprintf("retry-budget %d reads, %.0f%% fail once", b.N, 100*b.FailShare)
		drain := func(v FleetRun) string {
			if !v.Drained {
				return fmt.Sprintf("not drained in %s: %d reads left", b.Longest.Round(time.Second), b.left(v))
			}
			return ms(v.Elapsed)
		}
		add(Row{Scenario: name, Measure: "time to drain (1 replica, limit on)", Baseline: "budget off " + drain(b.NoBudget), Ours: "budget on " + drain(b.Budget)})
		add(Row{Scenario: name, Measure: "retries spent / denied; durable's peak ack pending",
			Baseline: fmt.Sprintf("%d / %d; %d", b.NoBudget.RetriesSpent, b.NoBudget.RetriesDenied, b.NoBudget.PeakAckPending),
			Ours:     fmt.Sprintf("%d / %d; %d", b.Budget.RetriesSpent, b.Budget.RetriesDenied, b.Budget.PeakAckPending)})
	}
	if p := r.Partial; p != nil {
		rows = append(rows, p.rows()...)
	}
	if o := r.Outage; o != nil {
		rows = append(rows, o.rows()...)
	}
	if m := r.Engines; m != nil {
		rows = append(rows, m.rows()...)
	}
	if p := r.Process; p != nil {
		rows = append(rows, p.rows()...)
	}
	return rows
}

// goodput is a fleet's goodput against the engine's capacity, and its drain
// against the ideal.
func goodput(r FleetRun, deadline time.Duration) string {
	if !r.Drained {
		return fmt.Sprintf("%.2f C (not drained in %s)", r.GoodputOverC, deadline.Round(time.Second))
	}
	return fmt.Sprintf("%.2f C (%.2fx)", r.GoodputOverC, r.DrainOverIdeal)
}

func share(part, whole int64) string {
	if whole == 0 {
		return "0 of 0"
	}
	return fmt.Sprintf("%.1f%% of %d", 100*float64(part)/float64(whole), whole)
}

func latencies(r FleetRun) string {
	return fmt.Sprintf("%.2fx (%s); %s", r.P99OverService, ms(r.P99), ms(r.P50))
}

func deadLetters(r FleetRun) string {
	if r.deadLettered() == 0 {
		return "0"
	}
	return fmt.Sprintf("%d %v", r.deadLettered(), r.DeadLetters)
}

func fleetState(r FleetRun) string {
	return fmt.Sprintf("%d; %d / %d; %d", r.BreakerOpened, r.RetriesSpent, r.RetriesDenied, r.LimitMedian)
}

func engineState(r FleetRun) string {
	return fmt.Sprintf("%.1f / %.1f; %d; %d", r.MeanBusy, r.MeanInSystem, r.Peak, r.PeakAckPending)
}

// WriteTable prints the rows as an aligned table.
func WriteTable(w io.Writer, r *Report) error { return WriteRows(w, r, r.Rows()) }

// WriteRows writes rows as WriteTable does, with r's run line: for a
// report read back from --json, whose rows were saved with it.
func WriteRows(w io.Writer, r *Report, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tmeasure\tbaseline\tours\tratio\ttarget\tmet\n")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Scenario, row.Measure, row.Baseline, row.Ours, row.Ratio, row.Target, row.Met)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	note := ""
	if r.Process != nil && r.Process.Skipped == "" {
		note = " The process scenario's are each process's own, from /proc, its nats-server a process of its own."
	}
	_, err := fmt.Fprintf(w, "\n%s, %d CPUs, took %s. CPU figures are process CPU (getrusage), the in-process NATS server included.%s\n",
		r.GoVersion, r.CPUs, r.Took.Round(time.Second), note)
	return err
}
