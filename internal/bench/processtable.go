package bench

import (
	"fmt"
	"strings"
)

// rows are the process scenario's table rows.
func (p *Process) rows() []Row {
	if p.Skipped != "" {
		return []Row{{Scenario: "process", Measure: "skipped: " + p.Skipped}}
	}
	name := fmt.Sprintf("process, %d reads of %d B, %d rounds", p.N, p.BodyBytes, p.Rounds)
	b, o := p.Bare, p.Product
	// figure is a figure's row: its median (min-max) over the rounds, the
	// bare's and ours.
	figure := func(measure, format string, of func(ProcessRun) float64) Row {
		return Row{Scenario: name, Measure: measure + "; median (min-max)", Baseline: spanText(b, of, format), Ours: spanText(o, of, format)}
	}
	first := figure("reads/s, first ack to the last acked", "%.0f/s", func(r ProcessRun) float64 { return r.ReadsPerSec })
	first.Measure += " of the rounds"
	first.Baseline = "bare process " + first.Baseline
	first.Ratio, first.Target, first.Met = ratio(p.Ratio.Median), fmt.Sprintf(">= %.2f", processTarget), met(p.Met)
	everyRun := func(r ProcessRun) string { return fmt.Sprintf("%.0f (%.0f)", r.ReadsPerSec, r.StartToEnd) }
	rows := []Row{first,
		{Scenario: name, Measure: "ours/bare reads/s, round by round; median (min-max)", Ours: strings.Join(mapped(p.Ratios, ratio), ", "),
			Ratio: fmt.Sprintf("%.2f (%.2f-%.2f)", p.Ratio.Median, p.Ratio.Min, p.Ratio.Max)},
		{Scenario: name, Measure: "every run, reads/s (start to end)",
			Baseline: strings.Join(mapped(b, everyRun), ", "), Ours: strings.Join(mapped(o, everyRun), ", ")},
	}
	for _, f := range []struct {
		measure, format string
		of              func(ProcessRun) float64
	}{
		{"process CPU/read (utime+stime, /proc/<pid>/stat)", "%.2f µs", func(r ProcessRun) float64 { return r.CPUMicros }},
		{"allocations/read (go_memstats_mallocs_total)", "%.1f", func(r ProcessRun) float64 { return r.Mallocs }},
		{"bytes allocated/read (go_memstats_alloc_bytes_total)", "%.0f B", func(r ProcessRun) float64 { return r.AllocBytes }},
		{"GC cycles per 1000 reads (go_gc_duration_seconds_count)", "%.2f", func(r ProcessRun) float64 { return r.GCPer1000 }},
	} {
		row := figure(f.measure, f.format, f.of)
		if mb := spanOf(mapped(b, f.of)).Median; mb > 0 {
			row.Ratio = ratio(spanOf(mapped(o, f.of)).Median / mb)
		}
		rows = append(rows, row)
	}
	hwm := figure("VmHWM (/proc/<pid>/status) at the end", "%.1f MiB", func(r ProcessRun) float64 { return float64(r.HWM) / (1 << 20) })
	hwm.Measure += "; the target on the largest"
	hwm.Target, hwm.Met = fmt.Sprintf("<= %d MiB", processHWM>>20), met(p.HWMMet)
	return append(rows, figure("start to the first ack", "%.0f ms", func(r ProcessRun) float64 { return float64(r.Startup.Microseconds()) / 1e3 }), hwm)
}

// mapped is f of each element of v.
func mapped[T, U any](v []T, f func(T) U) []U {
	out := make([]U, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

func spanText(runs []ProcessRun, of func(ProcessRun) float64, format string) string {
	s := spanOf(mapped(runs, of))
	return fmt.Sprintf(format+" ("+format+"-"+format+")", s.Median, s.Min, s.Max)
}
