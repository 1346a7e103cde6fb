package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Rate is how fast a variant got through its reads, and the process CPU it
// took (user + system, getrusage RUSAGE_SELF: the in-process NATS server, the
// loopback rate engine and the control polling are counted too).
type Rate struct {
	MsgsPerSec float64   `json:"msgs_per_sec"`
	CPUMicros  float64   `json:"cpu_us_per_msg"`
	Runs       []float64 `json:"runs_msgs_per_sec"`
	// Stall is the longest time the ack floor did not move in any run.
	Stall time.Duration `json:"longest_stall_ns"`
}

// best keeps the fastest of several passes over n reads, and every pass's
// rate.
func best(n int, runs []pass) Rate {
	var out Rate
	rate := func(p pass) float64 { return float64(n) / p.elapsed.Seconds() }
	for _, r := range runs {
		out.Runs = append(out.Runs, rate(r))
		out.Stall = max(out.Stall, r.stall)
	}
	if len(runs) > 0 {
		top := slices.MaxFunc(runs, func(a, b pass) int { return cmp.Compare(rate(a), rate(b)) })
		out.MsgsPerSec = rate(top)
		out.CPUMicros = float64(top.cpu.Nanoseconds()) / float64(n) / 1e3
	}
	return out
}

// drainTimeout bounds one pass over n reads: generous, so only a hang trips it.
func drainTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n)*200*time.Microsecond
}

// drainAll is drive over the n reads already published up to last, which
// must all be acked within drainTimeout.
func (e *env) drainAll(ctx context.Context, durable string, maxAckPending, n int, last uint64, start starter) (pass, error) {
	p, err := e.drive(ctx, nil, traffic{published: last, pending: maxAckPending, poll: 5 * time.Millisecond}, drainTimeout(n), durable, start)
	if err == nil && !p.drained {
		err = fmt.Errorf("not every read acked in %s", drainTimeout(n))
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", durable, err)
	}
	return p, nil
}

// Spread is how a set of redeliveries came back: the most in any window
// against the mean per window over the band they were due in.
type Spread struct {
	Count        int     `json:"count"`
	Peak         int     `json:"peak"`    // most in any window-long interval
	Windows      int     `json:"windows"` // windows in the band
	Mean         float64 `json:"mean"`    // Count / Windows
	PeakOverMean float64 `json:"peak_over_mean"`
}

// spreadOf measures times (sorted in place) with a sliding window against a
// band of windows windows.
func spreadOf(times []time.Time, window time.Duration, windows int) Spread {
	slices.SortFunc(times, time.Time.Compare)
	s := Spread{Count: len(times), Peak: peakIn(times, window), Windows: max(windows, 1)}
	s.Mean = float64(s.Count) / float64(s.Windows)
	if s.Mean > 0 {
		s.PeakOverMean = float64(s.Peak) / s.Mean
	}
	return s
}

// peakIn returns the most of sorted times in any interval [t, t+window).
func peakIn(sorted []time.Time, window time.Duration) int {
	peak, lo := 0, 0
	for hi, t := range sorted {
		for t.Sub(sorted[lo]) >= window {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

// windowsIn is how many window-long windows cover d (at least one).
func windowsIn(d, window time.Duration) int {
	return max(1, int((d+window-1)/window))
}

// Percentiles of a set of durations.
type Percentiles struct {
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// percentilesOf sorts ds in place.
func percentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	return Percentiles{P50: ds[len(ds)/2], P90: ds[len(ds)*90/100], P99: ds[len(ds)*99/100], Max: ds[len(ds)-1]}
}
