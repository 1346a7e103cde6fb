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

const benchUsage = `usage: consumer bench [--n N] [--scenario all|overhead|http|storm|steady|memory|scaling] [--smoke] [--json]

Starts an in-process NATS server and measures the consumer against bare
baselines run in the same process, reporting ratios (see docs/PERFORMANCE.md).

  --n N            reads per pass: overhead, scaling, in-process heap; http uses N/2 (default 200000)
  --scenario S     one scenario, or a comma-separated list, or all (default all)
  --pulls LIST     pull sizes of the overhead scenario (default 32,64,128,256)
  --memory-n N     backlog the consumer binary drains in the memory scenario (default 1000000)
  --smoke          tiny sizes: checks the machinery, asserts nothing
  --json           the report as JSON instead of a table
  --cpuprofile F   write a CPU profile of the whole run to F (goroutines labelled side=...)
`

// runBench runs "consumer bench ..."; it returns the exit code.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consumer bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		n          = fs.Int("n", 0, "")
		scenario   = fs.String("scenario", "all", "")
		pulls      = fs.String("pulls", "", "")
		memoryN    = fs.Int("memory-n", 0, "")
		smoke      = fs.Bool("smoke", false, "")
		jsonOut    = fs.Bool("json", false, "")
		cpuprofile = fs.String("cpuprofile", "", "")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, benchUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "consumer bench: %v\n\n%s", err, benchUsage)
		return exitBadUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "consumer bench: unexpected argument %q\n\n%s", fs.Arg(0), benchUsage)
		return exitBadUsage
	}
	cfg := bench.Defaults()
	if *smoke {
		cfg = bench.Smoke()
	}
	if *n > 0 {
		cfg.N = *n
	}
	if *memoryN > 0 {
		cfg.MemoryN = *memoryN
	}
	if *scenario != "all" {
		cfg.Scenarios = strings.Split(*scenario, ",")
	}
	if *pulls != "" {
		cfg.Pulls = nil
		for _, p := range strings.Split(*pulls, ",") {
			v, err := strconv.Atoi(p)
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
