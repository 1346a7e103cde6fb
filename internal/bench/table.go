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

func rate(v float64) string   { return fmt.Sprintf("%.0f/s", v) }
func micros(v float64) string { return fmt.Sprintf("%.2f µs", v) }
func ratio(v float64) string  { return fmt.Sprintf("%.2f", v) }
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
	if m := r.Engines; m != nil {
		rows = append(rows, m.rows()...)
	}
	if p := r.Process; p != nil {
		rows = append(rows, p.rows()...)
	}
	return rows
}

func share(part, whole int64) string {
	if whole == 0 {
		return "0 of 0"
	}
	return fmt.Sprintf("%.1f%% of %d", 100*float64(part)/float64(whole), whole)
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
