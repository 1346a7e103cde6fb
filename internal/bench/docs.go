package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/gendoc"
)

// TableHeader is the header of the table of a bench run.
var TableHeader = []string{"scenario", "measure", "baseline", "ours", "ratio", "target", "met"}

// PerformanceSection renders a report's table as the generated section of
// docs/PERFORMANCE.md: a line saying when and where it ran, then the rows
// (r.Rows(), or those of a saved --json report).
func PerformanceSection(r *Report, table []Row) string {
	rows := make([][]string, 0, len(table))
	for _, row := range table {
		rows = append(rows, []string{row.Scenario, row.Measure, row.Baseline, row.Ours, row.Ratio, row.Target, row.Met})
	}
	return gendoc.Render(r.Started, fmt.Sprintf(", %s, %d CPUs; the run took %s. Scenarios: %s.",
		r.GoVersion, r.CPUs, r.Took.Round(time.Second), strings.Join(r.Config.Scenarios, ", ")), TableHeader, rows)
}
