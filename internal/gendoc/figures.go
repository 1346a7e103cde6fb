package gendoc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FiguresHeader is the header of the table of the fault suite's figures.
var FiguresHeader = []string{"scenario", "test", "published", "delivered", "dead-lettered", "lost",
	"duplicated dead-letters", "downstream calls", "time to recover"}

// Figure is one FIGURES line of the fault suite (internal/reliability).
type Figure struct {
	Scenario, Test                                       string
	Published, Delivered, DeadLettered, Lost, Duplicates int
	Calls                                                int
	Recovery                                             time.Duration
}

var figureLine = regexp.MustCompile(`FIGURES (\S+): test=(\S+) published=(\d+) delivered=(\d+) dead-lettered=(\d+) lost=(\d+) duplicate-dead-letters=(\d+) downstream-calls=(\d+) recovery=(\S+)`)

// ParseFigures reads the FIGURES lines of `go test -v ./internal/reliability/`
// output, in the order they came; other lines are skipped. A scenario
// that appears twice keeps its last line.
func ParseFigures(r io.Reader) ([]Figure, error) {
	var out []Figure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		m := figureLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := Figure{Scenario: m[1], Test: m[2]}
		for i, dst := range []*int{&f.Published, &f.Delivered, &f.DeadLettered, &f.Lost, &f.Duplicates, &f.Calls} {
			if _, err := fmt.Sscan(m[3+i], dst); err != nil {
				return nil, fmt.Errorf("figures of %s: %w", f.Scenario, err)
			}
		}
		d, err := time.ParseDuration(m[9])
		if err != nil {
			return nil, fmt.Errorf("figures of %s: recovery: %w", f.Scenario, err)
		}
		f.Recovery = d
		out = slices.DeleteFunc(out, func(g Figure) bool { return g.Scenario == f.Scenario })
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("figures: no FIGURES line: give the output of go test -v ./internal/reliability/")
	}
	return out, nil
}

// FiguresSection renders the fault suite's figures as the generated
// section of docs/RELIABILITY.md, scenarios sorted by name.
func FiguresSection(figs []Figure, when time.Time) string {
	figs = slices.Clone(figs)
	slices.SortFunc(figs, func(a, b Figure) int { return strings.Compare(a.Scenario, b.Scenario) })
	rows := make([][]string, 0, len(figs))
	for _, f := range figs {
		recovery := "—"
		if f.Recovery > 0 {
			recovery = f.Recovery.String()
		}
		rows = append(rows, []string{f.Scenario, "`" + f.Test + "`", fmt.Sprint(f.Published), fmt.Sprint(f.Delivered),
			fmt.Sprint(f.DeadLettered), fmt.Sprint(f.Lost), fmt.Sprint(f.Duplicates), fmt.Sprint(f.Calls), recovery})
	}
	return Render(when, fmt.Sprintf(": %d scenarios.", len(figs)), FiguresHeader, rows)
}
