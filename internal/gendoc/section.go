package gendoc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The generated part of a doc lies between these two lines; everything
// outside them is written by hand.
const (
	Begin = "<!-- consumer-bench:table begin: generated, do not edit by hand -->"
	End   = "<!-- consumer-bench:table end -->"
)

// ErrNoSection is returned for a doc without the two marker lines.
var ErrNoSection = errors.New("no generated section")

// Render is a section's body: "Run on <when>" and what follows it on the
// same line, a blank line, then the table of header and rows (a pipe in a
// cell escaped).
func Render(when time.Time, after string, header []string, rows [][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s%s\n\n", when.UTC().Format("2006-01-02 15:04 MST"), after)
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
	return b.String()
}

// Section returns the generated section of doc, between the markers.
func Section(doc []byte) (string, error) {
	_, body, _, err := split(doc)
	return body, err
}

// Replace returns doc with its generated section replaced by body.
func Replace(doc []byte, body string) ([]byte, error) {
	before, _, after, err := split(doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString(before)
	out.WriteString(Begin + "\n\n" + strings.TrimSpace(body) + "\n\n" + End)
	out.WriteString(after)
	return out.Bytes(), nil
}

func split(doc []byte) (before, body, after string, err error) {
	s := string(doc)
	i := strings.Index(s, Begin)
	j := strings.Index(s, End)
	if i < 0 || j < i {
		return "", "", "", fmt.Errorf("%w: the doc needs a line %q, then a line %q, around the table", ErrNoSection, Begin, End)
	}
	return s[:i], strings.TrimSpace(s[i+len(Begin) : j]), s[j+len(End):], nil
}

// Check reports whether body has the shape Render gives it with header:
// its run line, a blank line, then the table, every row of as many cells;
// with met, the last cell of each row is yes, no or empty.
func Check(body string, header []string, met bool) error {
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "Run on ") || lines[1] != "" {
		return errors.New("want a line \"Run on ...\", a blank line, then the table")
	}
	table := lines[2:]
	if want := "| " + strings.Join(header, " | ") + " |"; table[0] != want {
		return fmt.Errorf("header is %q, want %q", table[0], want)
	}
	for i, l := range table[2:] {
		c := cells(l)
		if len(c) != len(header) {
			return fmt.Errorf("row %d has %d cells, want %d: %s", i+1, len(c), len(header), l)
		}
		if v := c[len(c)-1]; met && v != "yes" && v != "no" && v != "" {
			return fmt.Errorf("row %d: met is %q, want yes, no or empty", i+1, v)
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
