package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

// dlqCommand is one "consumer dlq" subcommand and the flag groups it takes.
type dlqCommand struct {
	name, args, summary string
	filters             bool // --reason --cause --subject --meter --since --until --limit
	json                bool // --json
	replay              bool // --dry-run --rate --max-replays
	yes                 bool // --yes
	by                  bool // --by
	why                 bool // --why
}

var dlqCommands = []dlqCommand{
	{name: "list", summary: "dead-lettered reads, in sequence order", filters: true, json: true},
	{name: "show", args: " SEQ", summary: "one read in full: every header and the payload"},
	{name: "stats", summary: "counts by reason and cause, oldest and newest", filters: true, json: true},
	{name: "replay", summary: "republish the selection to the original subjects, then delete the copies", filters: true, replay: true, by: true},
	{name: "purge", summary: "delete the selection; asks for confirmation unless --yes", filters: true, yes: true, by: true, why: true},
}

// dlqConnFlags are the configuration flags a dlq subcommand uses; it
// accepts every other consumer flag too, and ignores it.
var dlqConnFlags = []string{
	"nats-url", "nats-creds", "nats-user", "nats-nkey", "nats-ca", "nats-cert", "nats-key",
	"nats-listen", "nats-name", "stream", "dlq-stream",
}

const dlqNote = `Every subcommand also takes the consumer's connection settings as flags,
environment variables (NATS_URL, NATS_PASSWORD ...) or --config; --since and
--until take RFC 3339 or a duration ago (90m, 24h, 7d). See docs/DLQ.md.
`

// dlqUsage writes the overview of "consumer dlq".
func dlqUsage(w io.Writer) {
	fmt.Fprint(w, "usage: consumer dlq <subcommand> [flags]\n\n")
	for _, c := range dlqCommands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name+c.args, c.summary)
	}
	fmt.Fprintf(w, "\nconsumer dlq <subcommand> --help lists its flags.\n%s", dlqNote)
}

// dlqCommandUsage writes the help of one subcommand: its own flags, then the
// connection flags, each with its default.
func dlqCommandUsage(w io.Writer, c dlqCommand, fs *flag.FlagSet, own []string) {
	fmt.Fprintf(w, "usage: consumer dlq %s%s [flags]\n\n%s%s.\n", c.name, c.args, strings.ToUpper(c.summary[:1]), c.summary[1:])
	if len(own) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		config.PrintFlags(w, fs, own)
	}
	printConnFlags(w, fs, dlqConnFlags)
	fmt.Fprintf(w, "\n%s", dlqNote)
}

// dlqArgs are the values of a subcommand's own flags.
type dlqArgs struct {
	reason, cause, subject, meter, since, until string
	by, why                                     string
	limit, maxReplays                           int
	json, dryRun, yes                           bool
	rate                                        rateFlag
}

// rateFlag is --rate: reads a second, written N or N/s as the issue does
// ("--rate 5/s").
type rateFlag float64

func (r *rateFlag) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil {
		return fmt.Errorf("%q: want reads a second, such as 5 or 5/s", s)
	}
	*r = rateFlag(v)
	return nil
}

// define adds c's flags to fs; getenv gives --by its default.
func (a *dlqArgs) define(fs *flag.FlagSet, c dlqCommand, getenv func(string) string) {
	if c.filters {
		fs.StringVar(&a.reason, "reason", "", "why the read was dead-lettered: "+strings.Join(reasons(), " or "))
		fs.StringVar(&a.cause, "cause", "", "the cause, e.g. http_422 or invalid_payload")
		fs.StringVar(&a.subject, "subject", "", "original subject; NATS wildcards * and > allowed")
		fs.StringVar(&a.meter, "meter", "", "meter_id in the payload")
		fs.StringVar(&a.since, "since", "", "dead-lettered at or after: RFC 3339 or a duration ago")
		fs.StringVar(&a.until, "until", "", "dead-lettered at or before: RFC 3339 or a duration ago")
		fs.IntVar(&a.limit, "limit", 0, "at most this many reads, 0 for all")
	}
	if c.json {
		usage := "one JSON object per read, a line each"
		if c.name == "stats" {
			usage = "one JSON object"
		}
		fs.BoolVar(&a.json, "json", false, usage)
	}
	if c.replay {
		fs.BoolVar(&a.dryRun, "dry-run", false, "list what would be replayed, change nothing")
		a.rate = dlqops.DefaultRate
		fs.Var(&a.rate, "rate", "reads republished per second: `N` or N/s")
		fs.IntVar(&a.maxReplays, "max-replays", dlqops.DefaultMaxReplays, "skip reads replayed this many times already")
	}
	if c.yes {
		fs.BoolVar(&a.yes, "yes", false, "do not ask for confirmation")
	}
	if c.by {
		fs.StringVar(&a.by, "by", actor(getenv), "who is acting, recorded on the marks the audit reads")
	}
	if c.why {
		fs.StringVar(&a.why, "why", "", "why the copies are purged, recorded on their marks")
	}
}

// actor is the default of --by: the environment's USER, else LOGNAME, else
// dlqops.UnknownActor.
func actor(getenv func(string) string) string {
	if getenv == nil {
		return dlqops.UnknownActor
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return dlqops.UnknownActor
}

func reasons() []string {
	var rs []string
	for _, r := range dlq.Reasons() {
		rs = append(rs, string(r))
	}
	return rs
}

// filter checks the flag values and returns the selection. It connects to
// nothing.
func (a *dlqArgs) filter(now time.Time) (dlqops.Filter, error) {
	f := dlqops.Filter{Reason: a.reason, Cause: a.cause, Subject: a.subject, Meter: a.meter, Limit: a.limit}
	if f.Reason != "" && !slices.Contains(reasons(), f.Reason) {
		return f, fmt.Errorf("--reason %q: want %s", f.Reason, strings.Join(reasons(), " or "))
	}
	if err := parseSinceUntil(a.since, a.until, now, &f.Since, &f.Until); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// runDLQ runs "consumer dlq ..."; it returns the exit code. Every argument
// is checked before it connects to NATS.
func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		dlqUsage(stderr)
		return exitBadUsage
	}
	if slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		dlqUsage(stdout)
		return exitOK
	}
	sub, flags := args[0], args[1:]
	i := slices.IndexFunc(dlqCommands, func(c dlqCommand) bool { return c.name == sub })
	if i < 0 {
		names := make([]string, len(dlqCommands))
		for i, c := range dlqCommands {
			names[i] = c.name
		}
		fmt.Fprintf(stderr, "consumer dlq: unknown subcommand %q; valid subcommands: %s (consumer dlq --help)\n",
			sub, strings.Join(names, ", "))
		return exitBadUsage
	}
	cmd := dlqCommands[i]
	fail := toolFail(stderr, "consumer dlq "+sub)

	var positional []string
	if len(flags) > 0 && !strings.HasPrefix(flags[0], "-") {
		positional, flags = flags[:1], flags[1:] // show SEQ --nats-url ...
	}
	fs := flag.NewFlagSet("consumer dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a dlqArgs
	a.define(fs, cmd, getenv)
	own := flagNames(fs)
	cfg, rest, err := config.LoadTool(fs, flags, getenv)
	if err == nil && cmd.args != "" && len(positional) == 0 && len(rest) > 1 && strings.HasPrefix(rest[1], "-") {
		// Flags on both sides of the sequence (show --nats-url X 5
		// --stream Y): parsing stopped at it, so parse again without it.
		positional, flags = rest[:1], append(flags[:len(flags)-len(rest):len(flags)-len(rest)], rest[1:]...)
		fs = flag.NewFlagSet("consumer dlq "+sub, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		a = dlqArgs{}
		a.define(fs, cmd, getenv)
		cfg, rest, err = config.LoadTool(fs, flags, getenv)
	}
	if errors.Is(err, flag.ErrHelp) {
		dlqCommandUsage(stdout, cmd, fs, own)
		return exitOK
	}
	if err != nil {
		return fail(exitBadUsage, "%v (consumer dlq %s --help)", err, sub)
	}
	rest = append(positional, rest...)

	var seq uint64
	if cmd.args != "" {
		if len(rest) != 1 {
			return fail(exitBadUsage, "want one dead-letter sequence, e.g. consumer dlq show 42")
		}
		if seq, err = strconv.ParseUint(rest[0], 10, 64); err != nil || seq == 0 {
			return fail(exitBadUsage, "sequence %q: want a positive number, as consumer dlq list shows", rest[0])
		}
	} else if len(rest) > 0 {
		return fail(exitBadUsage, "unexpected argument %q (consumer dlq %s --help)", rest[0], sub)
	}
	f, err := a.filter(time.Now())
	if err != nil {
		return fail(exitBadUsage, "%v", err)
	}
	ro := dlqops.ReplayOptions{Filter: f, DryRun: a.dryRun, Rate: float64(a.rate), MaxReplays: a.maxReplays}
	if cmd.replay {
		// 0 is the library's "default"; given as a flag it is a value, and
		// none that works: refused rather than taken for the default.
		switch {
		case ro.Rate == 0:
			return fail(exitBadUsage, "--rate 0: want reads a second, more than 0")
		case ro.MaxReplays == 0:
			return fail(exitBadUsage, "--max-replays 0: want 1 or more")
		}
		if err := ro.Validate(); err != nil {
			return fail(exitBadUsage, "%v", err)
		}
	}

	conn, err := dialTool(ctx, cfg.NATS, stderr)
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	defer conn.Close()
	ops := &dlqops.Ops{JS: conn.js, Stream: cfg.DLQ.Stream, SourceStream: cfg.Stream.Name, Out: stdout, Terminal: isTerminal(stdout), Actor: a.by}

	switch sub {
	case "list":
		err = ops.List(ctx, f, a.json)
	case "stats":
		err = ops.Stats(ctx, f, a.json)
	case "show":
		err = ops.Show(ctx, seq)
	case "replay":
		var sum dlqops.ReplaySummary
		sum, err = ops.Replay(ctx, ro)
		if err == nil && sum.Failed > 0 {
			err = fmt.Errorf("%d reads could not be replayed; their dead-letter copies are kept", sum.Failed)
		}
	case "purge":
		declined := false
		confirm := func(n int) bool {
			if a.yes {
				return true
			}
			fmt.Fprintf(stderr, "delete %d dead-lettered reads from %s? type yes to confirm: ", n, cfg.DLQ.Stream)
			line, _ := bufio.NewReader(stdin).ReadString('\n')
			declined = strings.TrimSpace(line) != "yes"
			return !declined
		}
		_, err = ops.Purge(ctx, f, a.why, confirm)
		if err == nil && declined {
			// A script that runs purge without --yes and no one to answer
			// must not take "nothing deleted" for done.
			return fail(exitFailure, "purge not confirmed: nothing deleted (answer yes, or pass --yes)")
		}
	}
	if err != nil {
		return fail(exitFailure, "%v", conn.failure(err))
	}
	return exitOK
}
