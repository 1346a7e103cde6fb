package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

const (
	// processWorkers is the calls at once of both processes: the product's
	// --concurrency and the bare consumer's --workers.
	processWorkers = 32
	// processBarePull is the bare consumer's PullMaxMessages; the product
	// pulls what its defaults derive.
	processBarePull = 500
	// processTarget is the product's reads/s over the bare's, median of the
	// rounds, that the scenario asks for.
	processTarget = 0.85
	// processHWM is the most the binary's VmHWM may reach in any round: a
	// replica's memory target (docs/OPERATIONS.md), bounded by the pull and
	// the reads in flight, not by the backlog.
	processHWM      = 64 << 20
	processBodySize = 300
)

// passName names a pass of the process scenario by whether it runs the
// product.
var passName = map[bool]string{false: "bare", true: "product"}

// Process compares the product binary with the bare consumer, each run as a
// process of its own, one after the other (bare first in odd rounds, the
// product first in even ones), against one nats-server process
// and one engine in the bench's process, on backlogs of the same size.
type Process struct {
	Skipped   string `json:"skipped,omitempty"`
	N         int    `json:"n"`
	Rounds    int    `json:"rounds"`
	BodyBytes int    `json:"body_bytes"`
	Server    string `json:"nats_server"` // its --version
	// Bare and Product are every run, round by round; Ratios the
	// product's reads/s over the bare's of each round.
	Bare    []ProcessRun `json:"bare"`
	Product []ProcessRun `json:"product"`
	Ratios  []float64    `json:"ratios"`
	Ratio   Span         `json:"ratio"`
	Met     bool         `json:"met"`     // Ratio.Median >= 0.85
	HWMMet  bool         `json:"hwm_met"` // every round's VmHWM of the product <= 64 MiB
}

// Span is the median, least and greatest of a figure over the rounds.
type Span struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spanOf(v []float64) Span {
	if len(v) == 0 {
		return Span{}
	}
	s := slices.Sorted(slices.Values(v))
	return Span{Median: (s[(len(s)-1)/2] + s[len(s)/2]) / 2, Min: s[0], Max: s[len(s)-1]}
}

// ProcessRun is one process draining one backlog. The window is from the
// first poll that saw the durable's ack floor move to the poll that saw it
// at the last read (From says "start" when the first poll already saw the
// end: then it is from the process's start); every per-read figure is over
// the reads acked in it, each process's allocations and GC cycles read from
// its /metrics.
type ProcessRun struct {
	Publish     time.Duration `json:"publish_ns"` // the backlog, before the process starts
	Startup     time.Duration `json:"startup_ns"` // the process's start to the window's
	Window      time.Duration `json:"window_ns"`
	WindowReads int           `json:"window_reads"`
	From        string        `json:"from"`
	ReadsPerSec float64       `json:"reads_per_sec"`              // WindowReads / Window
	StartToEnd  float64       `json:"start_to_end_reads_per_sec"` // n / (the process's start to the last read acked)
	CPUMicros   float64       `json:"cpu_us_per_read"`            // utime + stime, /proc/<pid>/stat
	Mallocs     float64       `json:"mallocs_per_read"`
	AllocBytes  float64       `json:"alloc_bytes_per_read"`
	GCPer1000   float64       `json:"gc_cycles_per_1000_reads"`
	HWM         int64         `json:"vm_hwm_bytes"`
}

// runProcess runs cfg.ProcessRounds rounds of the process scenario, or says
// why it skipped them.
func runProcess(ctx context.Context, cfg Config) (out *Process, err error) {
	out = &Process{N: cfg.ProcessN, Rounds: cfg.ProcessRounds, BodyBytes: len(processBody(0))}
	_, perr := cpuOf(os.Getpid())
	switch {
	case cfg.NATSServer == "":
		out.Skipped = "no nats-server binary"
	case cfg.Binary == "":
		out.Skipped = "no consumer binary"
	case len(cfg.Bare) == 0:
		out.Skipped = "no bare consumer command"
	case perr != nil:
		out.Skipped = "no /proc: " + perr.Error()
	}
	if out.Skipped != "" {
		return out, nil
	}
	var srv *natsProc
	labelled(ctx, sideServer, func(ctx context.Context) { srv, err = startNATSProc(ctx, cfg.NATSServer) })
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, srv.close()) }()
	out.Server = srv.version
	e, err := newEnv(srv.url)
	if err != nil {
		return nil, err
	}
	defer e.close()
	// The engine answers 200 at once and keeps no ledger.
	eng, err := serveEngine(ctx, simengine.Options{Keep: func(string) bool { return false }})
	if err != nil {
		return nil, err
	}
	defer eng.Close()

	p := processPass{e: e, eng: eng, cfg: cfg}
	for round := range cfg.ProcessRounds {
		// The order alternates, round by round, so that a drift of the
		// machine (a store that grows, a neighbour's load) favours neither.
		runs := map[bool]ProcessRun{}
		for _, product := range []bool{round%2 == 1, round%2 == 0} {
			if runs[product], err = p.run(ctx, product, round); err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", passName[product], round+1, err)
			}
		}
		b, o := runs[false], runs[true]
		out.Bare, out.Product = append(out.Bare, b), append(out.Product, o)
		out.Ratios = append(out.Ratios, o.ReadsPerSec/b.ReadsPerSec)
		cfg.progress("process round %d: bare %.0f/s %.1f µs %.1f allocs/read, product %.0f/s %.1f µs %.1f allocs/read, ratio %.2f",
			round+1, b.ReadsPerSec, b.CPUMicros, b.Mallocs, o.ReadsPerSec, o.CPUMicros, o.Mallocs, out.Ratios[round])
	}
	out.Ratio = spanOf(out.Ratios)
	out.Met = out.Ratio.Median >= processTarget
	out.HWMMet = len(out.Product) > 0 && !slices.ContainsFunc(out.Product, func(r ProcessRun) bool { return r.HWM <= 0 || r.HWM > processHWM })
	return out, nil
}

// processBody is read i padded to processBodySize bytes with a field the
// contract does not know (and the product ignores).
func processBody(i int) []byte {
	b := Body(i)
	b = append(b[:len(b)-1], `,"note":"`...)
	b = append(b, strings.Repeat("x", max(0, processBodySize-2-len(b)))...)
	return append(b, `"}`...)
}
