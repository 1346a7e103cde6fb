// Package gendoc writes the generated sections of the project's docs: the
// part of a doc between two marker lines, holding a line that says when it
// ran and a markdown table, which a command rewrites and a test checks.
// consumer-bench writes docs/PERFORMANCE.md's from a bench report, and
// docs/RELIABILITY.md's from the FIGURES lines of the fault suite
// (internal/reliability), which this package reads.
package gendoc
