// Command consumer-bench measures the consumer against bare baselines run in
// the same process, and against rate engines with a capacity: see
// docs/PERFORMANCE.md. It is a separate binary so that the product binary
// (cmd/consumer) does not carry the bench.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/bench"
)

// Exit codes, as cmd/consumer's.
const (
	exitOK       = 0
	exitFailure  = 1
	exitBadUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const intro = `usage: consumer-bench [flags]

Starts an in-process NATS server and measures the consumer against bare
baselines run in the same process, and the fleet against the engine
matrix's rate engines, reporting ratios (see docs/PERFORMANCE.md). The
process scenario runs the consumer binary and a bare consumer (this binary)
as processes of their own against a nats-server process instead.

Flags:
`

// flagOrder is the order --help lists the flags in.
var flagOrder = []string{"n", "scenario", "pulls", "replicas", "engines-n", "engines-policies", "engines-cells", "engines-trace", "process-n", "process-rounds", "process-profile",
	"consumer-binary", "nats-server-binary", "smoke", "json", "cpuprofile", "doc", "from", "figures"}

// bareMode is the hidden first argument that runs the process scenario's
// bare consumer (bench.BareConsumer) instead of the bench.
const bareMode = "bare-consumer"

// run parses the flags, runs the bench and prints its report; it returns
// the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == bareMode {
		if err := bench.BareConsumer(ctx, args[1:]); err != nil {
			fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	def := bench.Defaults()
	fs := flag.NewFlagSet("consumer-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		n          = fs.Int("n", def.N, "reads per pass of the overhead scenario")
		scenario   = fs.String("scenario", "all", "one scenario, a comma-separated list, or all: "+strings.Join(bench.Scenarios(), ", "))
		pulls      = fs.String("pulls", joinInts(def.Pulls), "pull sizes of the overhead scenario, comma-separated")
		replicas   = fs.String("replicas", joinInts(def.Replicas), "fleet sizes of the engine matrix's capacity cells, comma-separated")
		enginesN   = fs.Int("engines-n", def.EnginesN, "backlog each backlog cell of the engines scenario drains (its capacity cells drain twice as many)")
		policies   = fs.String("engines-policies", "production,short", "retry policies the engines scenario runs its matrix with, comma-separated: "+strings.Join(bench.EnginesPolicyNames(), ", "))
		cells      = fs.String("engines-cells", "", "run only the engines scenario's cells whose name holds one of these, semicolon-separated (\"capacity, 16 replicas;down\"); default: all")
		trace      = fs.String("engines-trace", "", "write the timeline of every fleet the engines scenario runs to this file: a line every 5ms with the cell, the milliseconds since its first replica started, the engine's calls and sheds so far, and each replica's limit")
		processN   = fs.Int("process-n", def.ProcessN, "backlog each process of the process scenario drains")
		rounds     = fs.Int("process-rounds", def.ProcessRounds, "rounds of the process scenario: the bare consumer and the product, each round")
		profile    = fs.String("process-profile", "", "write a CPU profile of the product binary in each round of the process scenario to <prefix>-<round>.pprof (3s from its first ack; --pprof-addr)")
		binary     = fs.String("consumer-binary", "", "the consumer binary the process scenario runs (default: go build ./cmd/consumer into a temporary directory)")
		natsServer = fs.String("nats-server-binary", "", "the nats-server the process scenario runs (default: go build github.com/nats-io/nats-server/v2 into a temporary directory)")
		smoke      = fs.Bool("smoke", false, "tiny sizes: checks the machinery, asserts nothing; sizes given as flags still apply")
		jsonOut    = fs.Bool("json", false, "the report as JSON instead of a table")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (goroutines labelled side=...)")
		doc        = fs.String("doc", "", "also rewrite the generated table of this doc (docs/PERFORMANCE.md; docs/RELIABILITY.md with --figures)")
		from       = fs.String("from", "", "a report saved with --json: render it instead of running the bench")
		figures    = fs.String("figures", "", "output of go test -v ./internal/reliability/ (- for stdin): its FIGURES lines are the table of --doc; runs no bench")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, intro)
			config.PrintFlags(stdout, fs, flagOrder)
			return exitOK
		}
		fmt.Fprintf(stderr, "consumer-bench: %v (consumer-bench --help)\n", err)
		return exitBadUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "consumer-bench: unexpected argument %q (consumer-bench --help)\n", fs.Arg(0))
		return exitBadUsage
	}
	if *figures != "" {
		return writeFigures(*figures, *doc, stdout, stderr)
	}
	if *from != "" {
		return renderSaved(*from, *doc, *jsonOut, stdout, stderr)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	cfg := def
	if *smoke {
		cfg = bench.Smoke()
	}
	if given["n"] {
		cfg.N = *n
	}
	if given["engines-n"] {
		cfg.EnginesN, cfg.EnginesCapacityN = *enginesN, 2**enginesN
	}
	if given["engines-policies"] {
		cfg.EnginesPolicies = nil
		for _, name := range strings.Split(*policies, ",") {
			p, err := bench.EnginesPolicyNamed(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintf(stderr, "consumer-bench: --engines-policies: %v\n", err)
				return exitBadUsage
			}
			cfg.EnginesPolicies = append(cfg.EnginesPolicies, p)
		}
	}
	if given["engines-cells"] {
		for _, c := range strings.Split(*cells, ";") {
			if c = strings.TrimSpace(c); c != "" {
				cfg.EnginesCells = append(cfg.EnginesCells, c)
			}
		}
	}
	if given["process-n"] {
		cfg.ProcessN = *processN
	}
	if *profile != "" {
		cfg.ProcessProfile, cfg.ProcessProfileFor = *profile, 3*time.Second
	}
	if given["process-rounds"] {
		cfg.ProcessRounds = *rounds
	}
	if *scenario != "all" {
		cfg.Scenarios = strings.Split(*scenario, ",")
	}
	for _, l := range []struct {
		name, value string
		to          *[]int
	}{{"pulls", *pulls, &cfg.Pulls}, {"replicas", *replicas, &cfg.Replicas}} {
		if !given[l.name] {
			continue
		}
		v, err := parseInts(l.value)
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: --%s: %v\n", l.name, err)
			return exitBadUsage
		}
		*l.to = v
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "consumer-%v\n", err)
		return exitBadUsage
	}
	if !*smoke {
		cfg.Progress = stderr // a smoke run (CI) prints only the table, or an error
	}
	if *trace != "" {
		f, err := os.Create(*trace)
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: --engines-trace: %v\n", err)
			return exitFailure
		}
		w := bufio.NewWriter(f)
		defer func() {
			if err := errors.Join(w.Flush(), f.Close()); err != nil {
				fmt.Fprintf(stderr, "consumer-bench: --engines-trace: %v\n", err)
			}
		}()
		cfg.EnginesTrace = w
	}

	if cfg.Runs(bench.ScenarioProcess) {
		tmp, err := os.MkdirTemp("", "consumer-bench-bin-*")
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
			return exitFailure
		}
		defer os.RemoveAll(tmp)
		cfg.Binary, cfg.NATSServer = *binary, *natsServer
		if cfg.Binary == "" {
			if cfg.Binary, err = bench.BuildConsumer(ctx, tmp); err != nil {
				fmt.Fprintf(stderr, "consumer-bench: the consumer binary for the process scenario (or give --consumer-binary): %v\n", err)
				return exitFailure
			}
		}
		if cfg.NATSServer == "" {
			if cfg.NATSServer, err = bench.BuildNATSServer(ctx, tmp); err != nil {
				fmt.Fprintf(stderr, "consumer-bench: the nats-server of the process scenario (or give --nats-server-binary): %v\n", err)
				return exitFailure
			}
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: the bare consumer is this binary: %v\n", err)
			return exitFailure
		}
		cfg.Bare = []string{self, bareMode}
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
			return exitFailure
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "consumer-bench: cpu profile: %v\n", err)
			return exitFailure
		}
		defer pprof.StopCPUProfile()
	}

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
		return exitFailure
	}
	if *doc != "" {
		if err := writeDoc(*doc, bench.PerformanceSection(rep, rep.Rows())); err != nil {
			fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
			return exitFailure
		}
	}
	err = printReport(stdout, saved{rep, rep.Rows()}, *jsonOut)
	if err != nil {
		fmt.Fprintf(stderr, "consumer-bench: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", p)
		}
		out = append(out, v)
	}
	return out, nil
}
