package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/meterline/meter-consumer/internal/bench"
	"github.com/meterline/meter-consumer/internal/gendoc"
)

// saved is the --json report: the report and its table rows.
type saved struct {
	*bench.Report
	Table []bench.Row `json:"table"`
}

// printReport writes a report as JSON, or as the text table.
func printReport(w io.Writer, s saved, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return bench.WriteRows(w, s.Report, s.Table)
}

// renderSaved renders a report saved with --json: into doc's generated
// section when doc is given, and to stdout.
func renderSaved(path, doc string, asJSON bool, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "consumer-bench: --from: %v\n", err)
		return exitBadUsage
	}
	s := saved{Report: &bench.Report{}}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Table) == 0 {
		fmt.Fprintf(stderr, "consumer-bench: --from %s: not a report saved with --json (%v)\n", path, err)
		return exitBadUsage
	}
	if doc != "" {
		if err := writeDoc(doc, bench.PerformanceSection(s.Report, s.Table)); err != nil {
			fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
			return exitFailure
		}
	}
	if err := printReport(stdout, s, asJSON); err != nil {
		fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// writeFigures renders the fault suite's FIGURES lines into doc.
func writeFigures(path, doc string, stdout, stderr io.Writer) int {
	if doc == "" {
		fmt.Fprintln(stderr, "consumer-bench: --figures needs --doc docs/RELIABILITY.md")
		return exitBadUsage
	}
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: --figures: %v\n", err)
			return exitBadUsage
		}
		defer f.Close()
		in = f
	}
	figs, err := gendoc.ParseFigures(in)
	if err != nil {
		fmt.Fprintf(stderr, "consumer-bench: --figures: %v\n", err)
		return exitBadUsage
	}
	section := gendoc.FiguresSection(figs, time.Now())
	if err := writeDoc(doc, section); err != nil {
		fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(stdout, section)
	return exitOK
}

// writeDoc replaces the generated section of the doc at path.
func writeDoc(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--doc: %w", err)
	}
	out, err := gendoc.Replace(b, section)
	if err != nil {
		return fmt.Errorf("--doc %s: %w", path, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("--doc: %w", err)
	}
	return nil
}
