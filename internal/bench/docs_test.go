package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tables committed in the docs are the generator's: each doc has its
// section, in the shape consumer-bench --doc writes.
func TestDocsHoldGeneratedTables(t *testing.T) {
	for _, tc := range []struct{ path, kind string }{
		{"../../docs/PERFORMANCE.md", "performance"},
		{"../../docs/RELIABILITY.md", "reliability"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			b, err := os.ReadFile(tc.path)
			require.NoError(t, err)
			section, err := Section(b)
			require.NoError(t, err, "regenerate it: see the command at the top of %s", tc.path)
			assert.NoError(t, checkSection(section, tc.kind))
		})
	}
}

const suiteOutput = `=== RUN   TestOutageTenTimesTheRetryBudget
    ledger_test.go:287: FIGURES outage: test=TestOutageTenTimesTheRetryBudget published=294 delivered=294 dead-lettered=0 lost=0 duplicate-dead-letters=0 downstream-calls=312 recovery=650ms
--- PASS: TestOutageTenTimesTheRetryBudget (14.20s)
    ledger_test.go:287: FIGURES hostile-input: test=TestHostileInputIsDeadLetteredPrecisely published=241 delivered=181 dead-lettered=60 lost=0 duplicate-dead-letters=0 downstream-calls=181 recovery=0s
    ledger_test.go:287: FIGURES outage: test=TestOutageTenTimesTheRetryBudget published=294 delivered=294 dead-lettered=0 lost=0 duplicate-dead-letters=0 downstream-calls=310 recovery=700ms
`

// The fault suite's FIGURES lines become the reliability table, one row
// per scenario (the last line of a scenario run twice), sorted.
func TestReliabilitySectionFromTheSuitesFigures(t *testing.T) {
	figs, err := ParseFigures(strings.NewReader(suiteOutput))
	require.NoError(t, err)
	require.Len(t, figs, 2)
	section := ReliabilitySection(figs, time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC))
	assert.Equal(t, `Run on 2026-12-02 20:00 UTC: 2 scenarios.

| scenario | test | published | delivered | dead-lettered | lost | duplicated dead-letters | downstream calls | time to recover |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| hostile-input | `+"`TestHostileInputIsDeadLetteredPrecisely`"+` | 241 | 181 | 60 | 0 | 0 | 181 | — |
| outage | `+"`TestOutageTenTimesTheRetryBudget`"+` | 294 | 294 | 0 | 0 | 0 | 310 | 700ms |
`, section)
	assert.NoError(t, checkSection(section, "reliability"))

	_, err = ParseFigures(strings.NewReader("--- PASS: TestX\n"))
	assert.ErrorContains(t, err, "no FIGURES line")
}

// A section is replaced between its markers, the rest of the doc kept; a
// doc without the markers is an error that says what to add.
func TestReplaceSection(t *testing.T) {
	doc := "# Doc\n\nprose\n\n" + TableBegin + "\n\nold\n\n" + TableEnd + "\n\nmore prose\n"
	out, err := ReplaceSection([]byte(doc), "new table\n")
	require.NoError(t, err)
	assert.Equal(t, "# Doc\n\nprose\n\n"+TableBegin+"\n\nnew table\n\n"+TableEnd+"\n\nmore prose\n", string(out))
	got, err := Section(out)
	require.NoError(t, err)
	assert.Equal(t, "new table", got)

	_, err = ReplaceSection([]byte("# Doc\n"), "x")
	require.ErrorIs(t, err, ErrNoSection)
	assert.ErrorContains(t, err, TableBegin)
}

// checkSection refuses what the generator would not write.
func TestCheckSection(t *testing.T) {
	r := &Report{Started: time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC), GoVersion: "go1.26.8", CPUs: 2, Took: time.Minute}
	r.Config.Scenarios = []string{"overhead"}
	good := PerformanceSection(r, []Row{{Scenario: "overhead pull 32", Measure: "msgs/s", Baseline: "bare 1/s", Ours: "1/s", Ratio: "1.00", Target: ">= 0.85", Met: "yes"}})
	require.NoError(t, checkSection(good, "performance"))
	for name, bad := range map[string]string{
		"no run line":    strings.SplitN(good, "\n", 3)[2],
		"a cell missing": strings.Replace(good, "| 1.00 |", "|", 1),
		"met not yes/no": strings.Replace(good, "| yes |", "| maybe |", 1),
		"another header": strings.Replace(good, "| ratio |", "| share |", 1),
	} {
		assert.Error(t, checkSection(bad, "performance"), name)
	}
}

// checkSection reports whether a generated section has the shape the
// generator writes: its run line, then a table with the given kind's
// header and rows of as many cells. kind is "performance" or
// "reliability".
func checkSection(body, kind string) error {
	header := tableHeader
	if kind == "reliability" {
		header = figuresHeader
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "Run on ") || lines[1] != "" {
		return fmt.Errorf("%s section: want a line \"Run on ...\", a blank line, then the table", kind)
	}
	table := lines[2:]
	want := "| " + strings.Join(header, " | ") + " |"
	if table[0] != want {
		return fmt.Errorf("%s section: header is %q, want %q", kind, table[0], want)
	}
	for i, l := range table[2:] {
		c := cells(l)
		if len(c) != len(header) {
			return fmt.Errorf("%s section: row %d has %d cells, want %d: %s", kind, i+1, len(c), len(header), l)
		}
		if met := c[len(c)-1]; kind != "reliability" && met != "yes" && met != "no" && met != "" {
			return fmt.Errorf("%s section: row %d: met is %q, want yes, no or empty", kind, i+1, met)
		}
	}
	return nil
}

// cells splits a markdown table row, honouring escaped pipes.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	line = strings.ReplaceAll(line[1:len(line)-1], `\|`, "\x00")
	parts := strings.Split(line, "|")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.TrimSpace(p), "\x00", "|")
	}
	return parts
}
