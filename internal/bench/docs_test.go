package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/gendoc"
)

// docs/PERFORMANCE.md holds the table consumer-bench --doc writes.
func TestPerformanceDocHoldsTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/PERFORMANCE.md")
	require.NoError(t, err)
	section, err := gendoc.Section(b)
	require.NoError(t, err, "regenerate it: see the command in docs/PERFORMANCE.md")
	assert.NoError(t, gendoc.Check(section, TableHeader, true))
}

// A report's section is its run line and one row per table row.
func TestPerformanceSection(t *testing.T) {
	r := &Report{Started: time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC), GoVersion: "go1.26.8", CPUs: 2, Took: time.Minute}
	r.Config.Scenarios = []string{"overhead"}
	got := PerformanceSection(r, []Row{{Scenario: "overhead pull 32", Measure: "msgs/s", Baseline: "bare 1/s", Ours: "1/s", Ratio: "1.00", Target: ">= 0.85", Met: "yes"}})
	require.NoError(t, gendoc.Check(got, TableHeader, true))
	assert.True(t, strings.HasPrefix(got, "Run on 2026-12-02 20:00 UTC, go1.26.8, 2 CPUs; the run took 1m0s. Scenarios: overhead.\n\n"), got)
	assert.Contains(t, got, "| overhead pull 32 | msgs/s | bare 1/s | 1/s | 1.00 | >= 0.85 | yes |\n")
}
