package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The generated part of a doc lies between these two lines; everything
// outside them is written by hand.
const (
	TableBegin = "<!-- consumer-bench:table begin: generated, do not edit by hand -->"
	TableEnd   = "<!-- consumer-bench:table end -->"
)

// ErrNoSection is returned for a doc without the two marker lines.
var ErrNoSection = errors.New("no generated section")

// tableHeader is the header of the table of a bench run.
var tableHeader = []string{"scenario", "measure", "baseline", "ours", "ratio", "target", "met"}

// figuresHeader is the header of the table of the fault suite's figures.
var figuresHeader = []string{"scenario", "test", "published", "delivered", "dead-lettered", "lost",
	"duplicated dead-letters", "downstream calls", "time to recover"}

// PerformanceSection renders a report's table as the generated section of
// docs/PERFORMANCE.md: a line saying when and where it ran, then the rows
// (r.Rows(), or those of a saved --json report).
func PerformanceSection(r *Report, table []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s, %s, %d CPUs; the run took %s. Scenarios: %s.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.GoVersion, r.CPUs, r.Took.Round(time.Second), strings.Join(r.Config.Scenarios, ", "))
	rows := make([][]string, 0, len(table))
	for _, row := range table {
		rows = append(rows, []string{row.Scenario, row.Measure, row.Baseline, row.Ours, row.Ratio, row.Target, row.Met})
	}
	writeMarkdown(&b, tableHeader, rows)
	return b.String()
}

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

// ReliabilitySection renders the fault suite's figures as the generated
// section of docs/RELIABILITY.md, scenarios sorted by name.
func ReliabilitySection(figs []Figure, when time.Time) string {
	figs = slices.Clone(figs)
	slices.SortFunc(figs, func(a, b Figure) int { return strings.Compare(a.Scenario, b.Scenario) })
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s: %d scenarios.\n\n", when.UTC().Format("2006-01-02 15:04 MST"), len(figs))
	rows := make([][]string, 0, len(figs))
	for _, f := range figs {
		recovery := "—"
		if f.Recovery > 0 {
			recovery = f.Recovery.String()
		}
		rows = append(rows, []string{f.Scenario, "`" + f.Test + "`", fmt.Sprint(f.Published), fmt.Sprint(f.Delivered),
			fmt.Sprint(f.DeadLettered), fmt.Sprint(f.Lost), fmt.Sprint(f.Duplicates), fmt.Sprint(f.Calls), recovery})
	}
	writeMarkdown(&b, figuresHeader, rows)
	return b.String()
}

func writeMarkdown(b *strings.Builder, header []string, rows [][]string) {
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
}

// Section returns the generated section of doc, between the markers.
func Section(doc []byte) (string, error) {
	_, body, _, err := split(doc)
	return body, err
}

// ReplaceSection returns doc with its generated section replaced by body.
func ReplaceSection(doc []byte, body string) ([]byte, error) {
	before, _, after, err := split(doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString(before)
	out.WriteString(TableBegin + "\n\n" + strings.TrimSpace(body) + "\n\n" + TableEnd)
	out.WriteString(after)
	return out.Bytes(), nil
}

func split(doc []byte) (before, body, after string, err error) {
	s := string(doc)
	i := strings.Index(s, TableBegin)
	j := strings.Index(s, TableEnd)
	if i < 0 || j < i {
		return "", "", "", fmt.Errorf("%w: the doc needs a line %q, then a line %q, around the table", ErrNoSection, TableBegin, TableEnd)
	}
	return s[:i], strings.TrimSpace(s[i+len(TableBegin) : j]), s[j+len(TableEnd):], nil
}
