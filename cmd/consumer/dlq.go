package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlqops"
	"github.com/meterline/meter-consumer/internal/service"
)

const dlqUsage = `usage: consumer dlq <list|show|stats|replay|purge> [flags]

  list     dead-lettered reads: --reason --cause --subject --meter --since --until --limit --json
  show SEQ one read in full: headers and payload
  stats    counts by reason and cause, oldest and newest: same filters, --json
  replay   republish to the original subjects: same filters, --dry-run --rate N --max-replays N
  purge    delete the selection: same filters, --yes

Every subcommand also takes the consumer's connection flags (--nats-url, --config,
--stream, --dlq-stream ...) and environment variables. --since/--until take RFC 3339
or a duration ago (24h, 7d). See docs/DLQ.md.
`

// runDLQ runs "consumer dlq ..."; it returns the exit code.
func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, dlqUsage)
		if len(args) == 0 {
			return exitBadUsage
		}
		return exitOK
	}
	sub, flags := args[0], args[1:]
	var positional []string
	if len(flags) > 0 && !strings.HasPrefix(flags[0], "-") {
		positional, flags = flags[:1], flags[1:] // show SEQ --nats-url ...
	}
	fs := flag.NewFlagSet("consumer dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		reason  = fs.String("reason", "", "permanent or exhausted")
		cause   = fs.String("cause", "", "cause, e.g. http_422")
		subject = fs.String("subject", "", "original subject (wildcards allowed)")
		meterID = fs.String("meter", "", "meter_id in the payload")
		since   = fs.String("since", "", "dead-lettered at or after (RFC 3339 or a duration ago)")
		until   = fs.String("until", "", "dead-lettered at or before (RFC 3339 or a duration ago)")
		limit   = fs.Int("limit", 0, "at most this many reads (0: all)")
		jsonOut = fs.Bool("json", false, "one JSON object per line")
		dryRun  = fs.Bool("dry-run", false, "replay: list what would be replayed, change nothing")
		rate    = fs.Float64("rate", dlqops.DefaultRate, "replay: reads per second")
		maxRep  = fs.Int("max-replays", dlqops.DefaultMaxReplays, "replay: skip reads replayed this many times already")
		yes     = fs.Bool("yes", false, "purge: do not ask for confirmation")
	)
	cfg, rest, err := config.LoadTool(fs, flags, getenv)
	rest = append(positional, rest...)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stderr, dlqUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "consumer dlq %s: %v\n", sub, err)
		return exitBadUsage
	}
	if sub != "show" && len(rest) > 0 {
		fmt.Fprintf(stderr, "consumer dlq %s: unexpected argument %q\n", sub, rest[0])
		return exitBadUsage
	}
	now := time.Now()
	f := dlqops.Filter{Reason: *reason, Cause: *cause, Subject: *subject, Meter: *meterID, Limit: *limit}
	for _, tf := range []struct {
		give string
		to   *time.Time
		name string
	}{{*since, &f.Since, "--since"}, {*until, &f.Until, "--until"}} {
		if tf.give == "" {
			continue
		}
		if *tf.to, err = dlqops.ParseTimeFlag(tf.give, now); err != nil {
			fmt.Fprintf(stderr, "consumer dlq %s: %s: %v\n", sub, tf.name, err)
			return exitBadUsage
		}
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nc, err := service.Connect(ctx, cfg.NATS, log)
	if err != nil {
		fmt.Fprintf(stderr, "consumer dlq %s: not connected: %v\n", sub, err)
		return exitFailure
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "consumer dlq %s: %v\n", sub, err)
		return exitFailure
	}
	ops := &dlqops.Ops{JS: js, Stream: cfg.DLQ.Stream, SourceStream: cfg.Stream.Name, Out: stdout, Terminal: isTerminal(stdout)}

	switch sub {
	case "list":
		err = ops.List(ctx, f, *jsonOut)
	case "stats":
		err = ops.Stats(ctx, f, *jsonOut)
	case "show":
		if len(rest) != 1 {
			fmt.Fprintln(stderr, "consumer dlq show: want one dead-letter sequence, e.g. consumer dlq show 42")
			return exitBadUsage
		}
		seq, perr := strconv.ParseUint(rest[0], 10, 64)
		if perr != nil {
			fmt.Fprintf(stderr, "consumer dlq show: sequence %q: want a positive number\n", rest[0])
			return exitBadUsage
		}
		err = ops.Show(ctx, seq)
	case "replay":
		var sum dlqops.ReplaySummary
		sum, err = ops.Replay(ctx, dlqops.ReplayOptions{Filter: f, DryRun: *dryRun, Rate: *rate, MaxReplays: *maxRep})
		if err == nil && sum.Failed > 0 {
			err = fmt.Errorf("%d reads could not be replayed; their dead-letter copies are kept", sum.Failed)
		}
	case "purge":
		confirm := func(n int) bool {
			if *yes {
				return true
			}
			fmt.Fprintf(stderr, "delete %d dead-lettered reads from %s? type yes to confirm: ", n, cfg.DLQ.Stream)
			line, _ := bufio.NewReader(stdin).ReadString('\n')
			return strings.TrimSpace(line) == "yes"
		}
		var n int
		n, err = ops.Purge(ctx, f, confirm)
		if err == nil {
			fmt.Fprintf(stdout, "deleted %d\n", n)
		}
	default:
		fmt.Fprintf(stderr, "consumer dlq: unknown subcommand %q\n\n%s", sub, dlqUsage)
		return exitBadUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "consumer dlq %s: %v\n", sub, err)
		return exitFailure
	}
	return exitOK
}
