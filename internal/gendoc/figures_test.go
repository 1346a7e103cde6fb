package gendoc_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/gendoc"
)

const suiteOutput = `=== RUN   TestOutageTenTimesTheRetryBudget
    ledger_test.go:287: FIGURES outage: test=TestOutageTenTimesTheRetryBudget published=294 delivered=294 dead-lettered=0 lost=0 duplicate-dead-letters=0 downstream-calls=312 recovery=650ms
--- PASS: TestOutageTenTimesTheRetryBudget (14.20s)
    ledger_test.go:287: FIGURES hostile-input: test=TestHostileInputIsDeadLetteredPrecisely published=241 delivered=181 dead-lettered=60 lost=0 duplicate-dead-letters=0 downstream-calls=181 recovery=0s
    ledger_test.go:287: FIGURES outage: test=TestOutageTenTimesTheRetryBudget published=294 delivered=294 dead-lettered=0 lost=0 duplicate-dead-letters=0 downstream-calls=310 recovery=700ms
`

// The fault suite's FIGURES lines become the reliability table, one row
// per scenario (the last line of a scenario run twice), sorted.
func TestFiguresSection(t *testing.T) {
	figs, err := gendoc.ParseFigures(strings.NewReader(suiteOutput))
	require.NoError(t, err)
	require.Len(t, figs, 2)
	section := gendoc.FiguresSection(figs, time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC))
	assert.Equal(t, `Run on 2026-12-02 20:00 UTC: 2 scenarios.

| scenario | test | published | delivered | dead-lettered | lost | duplicated dead-letters | downstream calls | time to recover |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| hostile-input | `+"`TestHostileInputIsDeadLetteredPrecisely`"+` | 241 | 181 | 60 | 0 | 0 | 181 | — |
| outage | `+"`TestOutageTenTimesTheRetryBudget`"+` | 294 | 294 | 0 | 0 | 0 | 310 | 700ms |
`, section)
	assert.NoError(t, gendoc.Check(section, gendoc.FiguresHeader, false))

	_, err = gendoc.ParseFigures(strings.NewReader("--- PASS: TestX\n"))
	assert.ErrorContains(t, err, "no FIGURES line")
}

// docs/RELIABILITY.md holds the table consumer-bench --figures writes.
func TestReliabilityDocHoldsTheFigures(t *testing.T) {
	b, err := os.ReadFile("../../docs/RELIABILITY.md")
	require.NoError(t, err)
	section, err := gendoc.Section(b)
	require.NoError(t, err, "regenerate it: see the command in docs/RELIABILITY.md")
	assert.NoError(t, gendoc.Check(section, gendoc.FiguresHeader, false))
}
