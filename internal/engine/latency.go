package engine

import (
	"slices"
	"time"
)

// maxSamples closes a round early, however short it was.
const maxSamples = 256

// rounds gathers latencies into rounds and compares each round's median
// with a slowly moving baseline.
type rounds struct {
	min       int
	window    time.Duration
	tolerance float64
	rise      time.Duration
	span      time.Duration // the least a queue lasts

	samples []time.Duration
	start   time.Duration // the monotonic clock's reading at the round's first sample
	last    time.Duration // the last round's median
	// high is the last round's 90th percentile, or, before a round closed,
	// the longest latency seen.
	high     time.Duration
	baseline time.Duration
	streak   int           // queued rounds in a row
	since    time.Duration // the start of the first of them
	// low are the latencies of calls sent during dips, gathered until
	// there are lowSamples of them.
	low []time.Duration
}

// lowSamples calls sent during dips make one measure of the baseline:
// for latencies spread uniformly over 5-25ms their median's standard
// error is 1.8ms, and a measure that makes the median of 15ms look queued
// (below 10ms, at a tolerance of 1.5) is 2.8 of them off: once in about
// 400 dips, and undone as the baseline follows the rounds back up.
const lowSamples = 32

// dipped adds the latency of a call sent during a dip. Every lowSamples of
// them are a measure of the engine's latency while its fleet sends less:
// their median, taken for the baseline where it is lower, once a round
// has closed (the baseline then follows the rounds' medians up again,
// slowly). A queue the fleet's load makes is shorter in its dips; a
// latency that merely spreads is the same. Learnt from rounds alone, the
// baseline of a fleet that filled the engine's queue from its first round
// on was that queue (first medians of 15.9-17.5ms against a service time
// of 6ms): no queue was ever seen, and the fleet was shed instead.
func (r *rounds) dipped(d time.Duration) {
	if r.baseline == 0 {
		return
	}
	r.low = append(r.low, d)
	if len(r.low) < lowSamples {
		return
	}
	slices.Sort(r.low)
	r.baseline = min(r.baseline, r.low[len(r.low)/2])
	r.low = r.low[:0]
}

// add adds a sample and reports whether it closed a round that confirms a
// queue (the third queued round in a row, or any after it).
func (r *rounds) add(now, d time.Duration) bool {
	if len(r.samples) == 0 {
		r.start = now
	}
	r.samples = append(r.samples, d)
	if r.baseline == 0 {
		r.high = max(r.high, d)
	}
	long := (now - r.start) >= 2*r.baseline
	if len(r.samples) < maxSamples && (len(r.samples) < r.min || !long) {
		return false
	}
	slices.Sort(r.samples)
	m := r.samples[len(r.samples)/2]
	r.high = r.samples[len(r.samples)*9/10]
	took := (now - r.start)
	r.samples = r.samples[:0]
	r.last = m
	if r.baseline == 0 {
		r.baseline = m
		return false
	}
	base := r.baseline
	if float64(m) > r.tolerance*float64(base) && m-base >= r.rise {
		if r.streak == 0 {
			r.since = r.start
		}
		r.streak++
	} else {
		r.streak = 0
	}
	// The baseline follows the medians with a time constant of window going
	// up and a quarter of it going down: a queue that lasts is taken for the
	// engine's new latency after a while, a lower latency is learnt sooner.
	a := min(float64(took)/float64(r.window), 1)
	if m < base {
		a = min(4*a, 1)
	}
	r.baseline = base + time.Duration(a*float64(m-base))
	return r.queued(now)
}

// rising reports three queued rounds in a row or more, however short: the
// limit must not grow meanwhile.
func (r *rounds) rising() bool { return r.streak >= 3 }

// queued reports a queue: the last three rounds or more were queued, over
// at least span (a pause of the process, a burst of its own work, is not
// the engine's queue).
func (r *rounds) queued(now time.Duration) bool { return r.streak >= 3 && now-r.since >= r.span }
