package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/meterline/meter-consumer/internal/bench"
)

const benchIntro = `usage: consumer bench [flags]

Starts an in-process NATS server and measures the consumer against bare
baselines run in the same process, reporting ratios (see docs/PERFORMANCE.md).

Flags:
`

// benchUsage writes the help with every flag and its default.
func benchUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, benchIntro)
	printFlags(w, fs, []string{"n", "scenario", "pulls", "memory-n", "smoke", "json", "cpuprofile"})
}

// runBench runs "consumer bench ..."; it returns the exit code.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	def := bench.Defaults()
	fs := flag.NewFlagSet("consumer bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		n          = fs.Int("n", def.N, "reads per pass: overhead, scaling, in-process heap; http uses N/2")
		scenario   = fs.String("scenario", "all", "one scenario, a comma-separated list, or all: "+strings.Join(bench.Scenarios(), ", "))
		pulls      = fs.String("pulls", joinInts(def.Pulls), "pull sizes of the overhead scenario, comma-separated")
		memoryN    = fs.Int("memory-n", def.MemoryN, "backlog the consumer binary drains in the memory scenario")
		smoke      = fs.Bool("smoke", false, "tiny sizes: checks the machinery, asserts nothing; sizes given as flags still apply")
		jsonOut    = fs.Bool("json", false, "the report as JSON instead of a table")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (goroutines labelled side=...)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			benchUsage(stdout, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "consumer bench: %v (consumer bench --help)\n", err)
		return exitBadUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "consumer bench: unexpected argument %q (consumer bench --help)\n", fs.Arg(0))
		return exitBadUsage
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
	if given["memory-n"] {
		cfg.MemoryN = *memoryN
	}
	if *scenario != "all" {
		cfg.Scenarios = strings.Split(*scenario, ",")
	}
	if given["pulls"] {
		cfg.Pulls = nil
		for _, p := range strings.Split(*pulls, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				fmt.Fprintf(stderr, "consumer bench: --pulls: %q is not a number\n", p)
				return exitBadUsage
			}
			cfg.Pulls = append(cfg.Pulls, v)
		}
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "consumer %v\n", err)
		return exitBadUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "consumer bench: the consumer binary for the memory scenario: %v\n", err)
		return exitFailure
	}
	cfg.Binary = exe
	if !*smoke {
		cfg.Progress = stderr // a smoke run (CI) prints only the table, or an error
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "consumer bench: %v\n", err)
			return exitFailure
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "consumer bench: cpu profile: %v\n", err)
			return exitFailure
		}
		defer pprof.StopCPUProfile()
	}

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "consumer bench: %v\n", err)
		return exitFailure
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			*bench.Report
			Table []bench.Row `json:"table"`
		}{rep, rep.Rows()})
	} else {
		err = bench.WriteTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "consumer bench: %v\n", err)
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
