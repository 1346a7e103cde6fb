package bench

import (
	"fmt"
	"slices"
	"strings"
)

// rows are the process scenario's table rows.
func (p *Process) rows() []Row {
	if p.Skipped != "" {
		return []Row{{Scenario: "process", Measure: "skipped: " + p.Skipped}}
	}
	var rows []Row
	add := func(row Row) { rows = append(rows, row) }
	name := fmt.Sprintf("process, %d reads of %d B, %d rounds", p.N, p.BodyBytes, p.Rounds)
	b, o := p.Bare, p.Product
	rps := func(r ProcessRun) float64 { return r.ReadsPerSec }
	add(Row{Scenario: name, Measure: "reads/s, first ack to the last acked; median (min-max) of the rounds",
		Baseline: "bare process " + spanText(b, rps, "%.0f/s"), Ours: spanText(o, rps, "%.0f/s"), Ratio: ratio(p.Ratio.Median),
		Target: fmt.Sprintf(">= %.2f", processTarget), Met: met(p.Met)})
	add(Row{Scenario: name, Measure: "ours/bare reads/s, round by round; median (min-max)", Ours: ratios(p.Ratios),
		Ratio: fmt.Sprintf("%.2f (%.2f-%.2f)", p.Ratio.Median, p.Ratio.Min, p.Ratio.Max)})
	add(Row{Scenario: name, Measure: "every run, reads/s (start to end)", Baseline: everyRun(b), Ours: everyRun(o)})
	for _, f := range []struct {
		measure, format string
		of              func(ProcessRun) float64
	}{
		{"process CPU/read (utime+stime, /proc/<pid>/stat)", "%.2f µs", func(r ProcessRun) float64 { return r.CPUMicros }},
		{"allocations/read (bare: MemStats.Mallocs; ours: go_memstats_mallocs_total)", "%.1f", func(r ProcessRun) float64 { return r.Mallocs }},
		{"bytes allocated/read (bare: MemStats.TotalAlloc; ours: go_memstats_alloc_bytes_total)", "%.0f B", func(r ProcessRun) float64 { return r.AllocBytes }},
		{"GC cycles per 1000 reads (bare: MemStats.NumGC; ours: go_gc_duration_seconds_count)", "%.2f", func(r ProcessRun) float64 { return r.GCPer1000 }},
		{"read+write syscalls/read (/proc/<pid>/io syscr+syscw; diagnostic)", "%.2f", func(r ProcessRun) float64 { return r.Syscalls }},
		{"nats-server CPU/read in the same window", "%.2f µs", func(r ProcessRun) float64 { return r.ServerCPUMicros }},
		{"nats-server read+write syscalls/read in the same window", "%.2f", func(r ProcessRun) float64 { return r.ServerSyscalls }},
		{"the bench's CPU/read (the engine, the polling) in the same window", "%.2f µs", func(r ProcessRun) float64 { return r.BenchCPUMicros }},
		{"CPU/read of the three processes (consumer, nats-server, bench)", "%.2f µs", func(r ProcessRun) float64 {
			return r.CPUMicros + r.ServerCPUMicros + r.BenchCPUMicros
		}},
	} {
		mb, mo := spanOf(figures(b, f.of)).Median, spanOf(figures(o, f.of)).Median
		r := ""
		if mb > 0 {
			r = ratio(mo / mb)
		}
		add(Row{Scenario: name, Measure: f.measure + "; median (min-max)", Baseline: spanText(b, f.of, f.format), Ours: spanText(o, f.of, f.format), Ratio: r})
	}
	startup := func(r ProcessRun) float64 { return float64(r.Startup.Microseconds()) / 1e3 }
	hwm := func(r ProcessRun) float64 { return float64(r.HWM) / (1 << 20) }
	add(Row{Scenario: name, Measure: "start to the first ack; median (min-max)",
		Baseline: spanText(b, startup, "%.0f ms"), Ours: spanText(o, startup, "%.0f ms")})
	add(Row{Scenario: name, Measure: "VmHWM (/proc/<pid>/status) at the end; median (min-max); the target on the largest",
		Baseline: spanText(b, hwm, "%.1f MiB"), Ours: spanText(o, hwm, "%.1f MiB"),
		Target: fmt.Sprintf("<= %d MiB", processHWM>>20), Met: met(p.HWMMet)})
	add(Row{Scenario: name, Measure: "engine, all rounds: calls; keys called twice or more / never; bodies without their key; exit after SIGTERM",
		Baseline: engineText(b), Ours: engineText(o)})
	return rows
}

func figures(runs []ProcessRun, of func(ProcessRun) float64) []float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = of(r)
	}
	return v
}

func spanText(runs []ProcessRun, of func(ProcessRun) float64, format string) string {
	s := spanOf(figures(runs, of))
	return fmt.Sprintf(format+" ("+format+"-"+format+")", s.Median, s.Min, s.Max)
}

func ratios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = ratio(x)
	}
	return strings.Join(s, ", ")
}

func everyRun(runs []ProcessRun) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = fmt.Sprintf("%.0f (%.0f)", r.ReadsPerSec, r.StartToEnd)
	}
	return strings.Join(s, ", ")
}

func engineText(runs []ProcessRun) string {
	var t KeyTally
	exits := map[string]int{}
	for _, r := range runs {
		t.Calls += r.Engine.Calls
		t.Duplicated += r.Engine.Duplicated
		t.Missed += r.Engine.Missed
		t.Mismatched += r.Engine.Mismatched
		exits[r.Exit]++
	}
	ex := make([]string, 0, len(exits))
	for e, n := range exits {
		ex = append(ex, fmt.Sprintf("%s x%d", e, n))
	}
	slices.Sort(ex)
	return fmt.Sprintf("%d; %d / %d; %d; %s", t.Calls, t.Duplicated, t.Missed, t.Mismatched, strings.Join(ex, ", "))
}
