package bench

import (
	"slices"
	"time"
)

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
	sortTimes(times)
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

// sortTimes sorts ts in place and returns it.
func sortTimes(ts []time.Time) []time.Time {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}
