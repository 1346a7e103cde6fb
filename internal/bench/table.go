package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meterline/meter-consumer/internal/gendoc"
)

// TableHeader is the header of the table of a bench run.
var TableHeader = []string{"scenario", "measure", "baseline", "ours", "ratio", "target", "met"}

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

// cells are the row's columns, in TableHeader's order.
func (r Row) cells() []string {
	return []string{r.Scenario, r.Measure, r.Baseline, r.Ours, r.Ratio, r.Target, r.Met}
}

// named sets the scenario of rows to name.
func named(name string, rows ...Row) []Row {
	for i := range rows {
		rows[i].Scenario = name
	}
	return rows
}

// The formats of the table's cells.
func met(ok bool) string        { return map[bool]string{true: "yes", false: "no"}[ok] }
func rate(v float64) string     { return fmt.Sprintf("%.0f/s", v) }
func micros(v float64) string   { return fmt.Sprintf("%.2f µs", v) }
func ratio(v float64) string    { return fmt.Sprintf("%.2f", v) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1e3) }

func share(part, whole int64) string {
	if whole == 0 {
		return "0 of 0"
	}
	return fmt.Sprintf("%.1f%% of %d", 100*float64(part)/float64(whole), whole)
}

// Rows flattens the report into table rows, scenario by scenario.
func (r *Report) Rows() []Row {
	var rows []Row
	if r.Overhead != nil {
		rows = append(rows, r.Overhead.rows()...)
	}
	if r.Storm != nil {
		rows = append(rows, r.Storm.rows()...)
	}
	if r.Steady != nil {
		rows = append(rows, r.Steady.rows()...)
	}
	if r.Engines != nil {
		rows = append(rows, r.Engines.rows()...)
	}
	if r.Process != nil {
		rows = append(rows, r.Process.rows()...)
	}
	return rows
}

// WriteTable prints the rows as an aligned table.
func WriteTable(w io.Writer, r *Report) error { return WriteRows(w, r, r.Rows()) }

// WriteRows writes rows as WriteTable does, with r's run line: for a
// report read back from --json, whose rows were saved with it.
func WriteRows(w io.Writer, r *Report, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(TableHeader, "\t"))
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row.cells(), "\t"))
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

// PerformanceSection renders a report's table as the generated section of
// docs/PERFORMANCE.md: a line saying when and where it ran, then the rows
// (r.Rows(), or those of a saved --json report).
func PerformanceSection(r *Report, table []Row) string {
	rows := make([][]string, len(table))
	for i, row := range table {
		rows[i] = row.cells()
	}
	return gendoc.Render(r.Started, fmt.Sprintf(", %s, %d CPUs; the run took %s. Scenarios: %s.",
		r.GoVersion, r.CPUs, r.Took.Round(time.Second), strings.Join(r.Config.Scenarios, ", ")), TableHeader, rows)
}
