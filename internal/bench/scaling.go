package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/stream"
)

// Scaling is the pipeline's throughput with several instances on one
// durable, each a separate stream.Consumer on its own connection.
type Scaling struct {
	N       int          `json:"n"`
	CPUs    int          `json:"cpus"`
	Rows    []ScalingRow `json:"rows"`
	NoSplit string       `json:"no_split,omitempty"` // why there is no CPU split
}

// ScalingRow is one instance count.
type ScalingRow struct {
	Instances  int     `json:"instances"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	Speedup    float64 `json:"speedup"`  // against one instance
	CPUBusy    float64 `json:"cpu_busy"` // process CPU / (wall time x CPUs)
	CPUMicros  float64 `json:"cpu_us_per_msg"`
	// Split is the share of the profiled CPU by side: server (the
	// in-process NATS server), consumer (the pipeline and its nats.go
	// client), other (runtime, GC, the control connection).
	Split map[string]float64 `json:"cpu_split,omitempty"`
}

func runScaling(ctx context.Context, e *env, cfg Config) (*Scaling, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	last, err := publishBacklog(ctx, e.js, 0, cfg.N)
	if err != nil {
		return nil, err
	}
	out := &Scaling{N: cfg.N, CPUs: runtime.NumCPU()}
	for _, k := range []int{1, 2, 4} {
		start := ours(e, k, func(js jetstream.JetStream) (stream.Options, error) {
			return pipelineOptions(js, e.topo, noop, 0), nil
		})
		var r run
		drain := func() error {
			var err error
			r, err = e.drain(ctx, fmt.Sprintf("scale-%d", k), 0, cfg.N, last, start)
			return err
		}
		bySide, err := cpuProfile(drain)
		if errors.Is(err, errProfileBusy) {
			out.NoSplit = err.Error() + ": see that profile's side labels"
			err = drain()
		}
		if err != nil {
			return nil, err
		}
		row := ScalingRow{Instances: k, MsgsPerSec: r.rate(),
			CPUBusy:   r.cpu.Seconds() / r.elapsed.Seconds() / float64(out.CPUs),
			CPUMicros: float64(r.cpu.Nanoseconds()) / float64(r.n) / 1e3,
			Split:     shares(bySide)}
		if len(out.Rows) > 0 {
			row.Speedup = row.MsgsPerSec / out.Rows[0].MsgsPerSec
		} else {
			row.Speedup = 1
		}
		out.Rows = append(out.Rows, row)
		cfg.progress("scaling %d: %.0f/s, CPU busy %.0f%%, server %.0f%% consumers %.0f%%", k, row.MsgsPerSec,
			100*row.CPUBusy, 100*row.Split[sideServer], 100*row.Split[sideConsumer])
	}
	return out, nil
}

// shares turns CPU by side into fractions, folding the unlabelled and minor
// sides into other.
func shares(bySide map[string]time.Duration) map[string]float64 {
	if len(bySide) == 0 {
		return nil
	}
	var total time.Duration
	for _, d := range bySide {
		total += d
	}
	out := map[string]float64{}
	for side, d := range bySide {
		if side != sideServer && side != sideConsumer {
			side = "other"
		}
		out[side] += d.Seconds() / total.Seconds()
	}
	return out
}
