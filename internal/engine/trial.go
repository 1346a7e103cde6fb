package engine

import (
	"math"
	"time"
)

// Judgement is what a trial found the engine's sheds to be.
type Judgement int

const (
	// Undecided: no trial has decided, or its verdict has lapsed.
	Undecided Judgement = iota
	// Load: the share shed fell when the fleet sent less: the engine is
	// overloaded, its sheds are its load, not the reads'.
	Load
	// Own: the share shed stayed the same when the fleet sent less: the
	// sheds are the reads' own (or a partial failure of the engine that no
	// pacing cures), up to that share.
	Own
)

var judgements = [...]string{Undecided: "undecided", Load: "load", Own: "own"}

func (j Judgement) String() string { return judgements[j] }

// trial tells whether the engine's sheds move with the load the fleet
// sends. While it runs, the replica dips: from each wall-clock multiple of
// DipEvery it holds its calls in flight at half its limit for a dip's
// length, and first attempts sent during a dip (low) are set against those
// sent outside them (normal). Every replica of a fleet dips on the same
// wall-clock multiples while it suspects the engine, and replicas of one
// fleet suspect together (they see the same engine), so the fleet as a
// whole sends less during a dip: an engine kept busy by the fleet sheds
// less then; an engine failing reads on their own fails as many.
//
// The verdict is a sequential test (Wald's) between two hypotheses about
// the low calls' shed share: the reads' own (as high as the normal share)
// and load (the share beyond the background halved), decided when one is
// Confidence times likelier than the other. It takes a few dozen low calls
// where the two shares are far apart, more where they are close, and a
// trial that has not decided after MaxDips starts again.
type trial struct {
	on     bool
	began  time.Duration // monotonic
	dips   int
	dipEnd time.Duration // the end of the last dip asked for (monotonic; 0: none yet)
	// Normal and low first attempts, how many of each were shed, and the
	// sum of the calls in flight when each was sent.
	normal, normalShed, normalFlight int
	low, lowShed, lowFlight          int
	lastLow                          bool // the last first attempt counted was low
}

// start begins a trial at now. Its evidence is the first attempts
// answered from then on, low and normal alike: the window that raised the
// suspicion is older than the dips, and where failures come in a burst
// (reads of one head-end, one tariff) it would set the first dips against
// an earlier engine.
func (t *trial) start(now time.Duration) {
	*t = trial{on: true, began: now}
}

// add counts a first attempt answered during the trial, sent with
// inFlight calls in flight.
func (t *trial) add(low, shed bool, inFlight int) {
	switch {
	case low:
		t.low++
		t.lowFlight += inFlight
		if shed {
			t.lowShed++
		}
	default:
		t.normal++
		t.normalFlight += inFlight
		if shed {
			t.normalShed++
		}
	}
}

// minHalved is the fewest calls in flight, on average outside the dips,
// that a dip can halve to some effect.
const minHalved = 4

// halved reports that the dips lowered the calls in flight to at most
// 0.6 of what they were outside them, from minHalved or more; calls whose
// in flight is not known (0) are taken as halved.
func (t *trial) halved() bool {
	if t.normal == 0 || t.low == 0 || t.normalFlight == 0 {
		return t.normalFlight == 0
	}
	n, l := float64(t.normalFlight)/float64(t.normal), float64(t.lowFlight)/float64(t.low)
	return n >= minHalved && l <= 0.6*n
}

// flight is the calls in flight, on average, when the normal calls were
// sent (0: not known).
func (t *trial) flight() float64 {
	if t.normal == 0 {
		return 0
	}
	return float64(t.normalFlight) / float64(t.normal)
}

// odds is the log-likelihood ratio of load over the reads' own, given the
// background share b: positive says load.
func (t *trial) odds(b float64) float64 {
	if t.normal == 0 || t.low == 0 {
		return 0
	}
	// Own: as high as outside the dips. Load: the excess over b halved, or,
	// of an engine refusing more than half of what it is sent (a capacity
	// overrun more than twice over), what is left past its capacity when
	// the load halves (2p0-1: halving 6 times its capacity leaves 3 times).
	p0 := clamp(float64(t.normalShed)/float64(t.normal), 0.005, 0.995)
	p1 := clamp(max((p0+min(b, p0))/2, 2*p0-1), 0.0025, 0.995)
	return float64(t.lowShed)*math.Log(p1/p0) + float64(t.low-t.lowShed)*math.Log((1-p1)/(1-p0))
}

// z is the normal calls' shed share less the low calls', in standard
// deviations of their difference (a two-proportion test; 0 without both).
func (t *trial) z() float64 {
	if t.normal == 0 || t.low == 0 {
		return 0
	}
	pl, pn := float64(t.lowShed)/float64(t.low), float64(t.normalShed)/float64(t.normal)
	p := float64(t.lowShed+t.normalShed) / float64(t.low+t.normal)
	sd := math.Sqrt(p * (1 - p) * (1/float64(t.low) + 1/float64(t.normal)))
	if sd == 0 {
		return 0
	}
	return (pn - pl) / sd
}

// rising reports the low calls' shed share above the normal calls',
// beyond chance (two standard deviations of their difference).
func (t *trial) rising() bool { return t.z() < -2 }

// share is the normal calls' shed share, pooled with the low ones when the
// reads are found at fault (the shares are the same then).
func (t *trial) share(pooled bool) float64 {
	n, s := t.normal, t.normalShed
	if pooled {
		n, s = n+t.low, s+t.lowShed
	}
	if n == 0 {
		return 0
	}
	return float64(s) / float64(n)
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(x, hi)) }

// nextDip is when the next dip starts, as an offset from now, given the
// wall clock: the next multiple of every after it.
func nextDip(wall time.Time, every time.Duration) time.Duration {
	next := wall.Truncate(every).Add(every)
	return next.Sub(wall)
}
