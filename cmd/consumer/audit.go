package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/audit"
)

// auditConnFlags are the configuration flags "consumer audit" uses.
var auditConnFlags = append([]string{"durable", "dlq-prefix"}, dlqConnFlags...)

const auditUsageText = `usage: consumer audit (--since T --until T | --day D | --from-seq N --to-seq M) [flags]

Accounts for every read of the period: billed (at or below the durable's ack
floor, no dead-letter copy), dead-lettered, not yet settled, missing from the
stream; with --engine-ledger, against the rate engine's own ledger. It reads
the source stream by direct gets (it creates no consumer there) and the
dead-letter stream through an ephemeral ordered consumer, and acks nothing. The exit
code is 0 only when every read is explained, 1 when there is a finding or the
audit could not run, 2 for a bad flag. See docs/AUDIT.md.
`

// auditArgs are the values of the audit's own flags.
type auditArgs struct {
	since, until, day    string
	fromSeq, toSeq       uint64
	json                 bool
	ledger, ledgerColumn string
	sortMemoryMiB        int
}

func (a *auditArgs) define(fs *flag.FlagSet) {
	fs.StringVar(&a.since, "since", "", "reads stored at or after: RFC 3339 or a duration ago (stream timestamps)")
	fs.StringVar(&a.until, "until", "", "reads stored at or before: RFC 3339 or a duration ago")
	fs.StringVar(&a.day, "day", "", "one UTC day: YYYY-MM-DD, or yesterday (instead of --since and --until)")
	fs.Uint64Var(&a.fromSeq, "from-seq", 0, "first stream sequence of the period (with --to-seq)")
	fs.Uint64Var(&a.toSeq, "to-seq", 0, "last stream sequence of the period, inclusive")
	fs.BoolVar(&a.json, "json", false, "the report as one JSON object")
	fs.StringVar(&a.ledger, "engine-ledger", "", "`file` of the keys the rate engine billed: one a line, or CSV with --engine-ledger-column")
	fs.StringVar(&a.ledgerColumn, "engine-ledger-column", "", "the CSV column of --engine-ledger holding the idempotency key")
	fs.IntVar(&a.sortMemoryMiB, "sort-memory", audit.DefaultSortMemory>>20, "MiB sorted in memory before spilling to $TMPDIR")
}

// period checks the flags and returns the period; it connects to nothing.
func (a *auditArgs) period(now time.Time) (audit.Period, error) {
	var p audit.Period
	if a.day != "" {
		if a.since != "" || a.until != "" {
			return p, errors.New("--day: give --day, or --since and --until, not both")
		}
		d := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
		if a.day != "yesterday" {
			var err error
			if d, err = time.Parse(time.DateOnly, a.day); err != nil {
				return p, fmt.Errorf("--day %q: want YYYY-MM-DD or yesterday", a.day)
			}
		}
		p.Since, p.Until = d, d.AddDate(0, 0, 1).Add(-time.Nanosecond)
	}
	if err := parseSinceUntil(a.since, a.until, now, &p.Since, &p.Until); err != nil {
		return p, err
	}
	p.FromSeq, p.ToSeq = a.fromSeq, a.toSeq
	if p == (audit.Period{}) {
		return p, errors.New("no period: give --since and --until, --day, or --from-seq and --to-seq")
	}
	if a.sortMemoryMiB < 1 {
		return p, fmt.Errorf("--sort-memory %d: want 1 MiB or more", a.sortMemoryMiB)
	}
	if a.ledgerColumn != "" && a.ledger == "" {
		return p, errors.New("--engine-ledger-column without --engine-ledger: give the ledger's file too")
	}
	return p, p.Validate()
}

// runAudit runs "consumer audit"; it returns the exit code. Every argument
// is checked before it connects to NATS.
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fail := toolFail(stderr, "consumer audit")
	fs := flag.NewFlagSet("consumer audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditArgs
	a.define(fs)
	own := flagNames(fs)
	cfg, rest, err := config.LoadTool(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, auditUsageText)
		fmt.Fprint(stdout, "\nFlags:\n")
		config.PrintFlags(stdout, fs, own)
		printConnFlags(stdout, fs, auditConnFlags)
		return exitOK
	}
	if err != nil {
		return fail(exitBadUsage, "%v (consumer audit --help)", err)
	}
	if len(rest) > 0 {
		return fail(exitBadUsage, "unexpected argument %q (consumer audit --help)", rest[0])
	}
	p, err := a.period(time.Now())
	if err != nil {
		return fail(exitBadUsage, "%v", err)
	}
	var ledger *audit.Ledger
	if a.ledger != "" {
		f, err := os.Open(a.ledger)
		if err != nil {
			return fail(exitBadUsage, "--engine-ledger: %v", err)
		}
		defer f.Close()
		if a.ledgerColumn != "" {
			head, err := audit.LedgerColumns(f)
			if err != nil {
				return fail(exitBadUsage, "--engine-ledger %s: %v", a.ledger, err)
			}
			if head != nil && !slices.Contains(head, a.ledgerColumn) {
				return fail(exitBadUsage, "--engine-ledger-column %q: no such column in %s's header row (%s)", a.ledgerColumn, a.ledger, strings.Join(head, ","))
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fail(exitBadUsage, "--engine-ledger: %v", err)
			}
		}
		ledger = &audit.Ledger{Name: a.ledger, R: f, Column: a.ledgerColumn}
	}

	conn, err := dialTool(ctx, cfg.NATS, stderr)
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	defer conn.Close()
	aud := &audit.Auditor{JS: conn.js, Stream: cfg.Stream.Name, DLQStream: cfg.DLQ.Stream, DLQPrefix: cfg.DLQ.Prefix,
		Durable: cfg.Consumer.Durable, SortMemory: a.sortMemoryMiB << 20}
	if isTerminal(stderr) {
		aud.Progress = func(done, total uint64) { fmt.Fprintf(stderr, "\rreads walked %d of at most %d", done, total) }
	}
	res, err := aud.Run(ctx, p, ledger)
	if aud.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		return fail(exitFailure, "%v", conn.failure(err))
	}
	defer res.Close()
	if a.json {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return fail(exitFailure, "write the report: %v", err)
	}
	// One line for a log-based alert, whatever the output.
	sum := res.Summary
	attrs := []any{slog.Bool("explained", res.Explained()), slog.Int("findings", res.FindingCount()),
		slog.String("period", sum.Period), slog.Uint64("reads", sum.Reads), slog.Uint64("billed", sum.Billed),
		slog.String("billed_basis", sum.BilledBasis), slog.Uint64("acked", sum.Acked),
		slog.Uint64("dead_lettered", sum.DeadLettered), slog.Uint64("replayed", sum.Replayed), slog.Uint64("purged", sum.Purged),
		slog.Uint64("unsettled", sum.Unsettled), slog.Uint64("missing", sum.Missing)}
	var kinds []any
	for _, k := range audit.Kinds() {
		if n := sum.Findings[k]; n > 0 {
			kinds = append(kinds, slog.Int(string(k), n))
		}
	}
	if len(kinds) > 0 {
		attrs = append(attrs, slog.Group("by_kind", kinds...))
	}
	slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("consumer audit", attrs...)
	if !res.Explained() {
		return exitFailure
	}
	return exitOK
}

// dropTime leaves the time off the summary line: the log collector stamps it.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
