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
	// Normal and low first attempts, and how many of each were shed.
	normal, normalShed int
	low, lowShed       int
}

// start begins a trial at now. Its evidence is the first attempts
// answered from then on, low and normal alike: the window that raised the
// suspicion is older than the dips, and where failures come in a burst
// (reads of one head-end, one tariff) it would set the first dips against
// an earlier engine.
func (t *trial) start(now time.Duration) {
	*t = trial{on: true, began: now}
}

// add counts a first attempt answered during the trial.
func (t *trial) add(low, shed bool) {
	switch {
	case low:
		t.low++
		if shed {
			t.lowShed++
		}
	default:
		t.normal++
		if shed {
			t.normalShed++
		}
	}
}

// odds is the log-likelihood ratio of load over the reads' own, given the
// background share b: positive says load.
func (t *trial) odds(b float64) float64 {
	if t.normal == 0 || t.low == 0 {
		return 0
	}
	p0 := clamp(float64(t.normalShed)/float64(t.normal), 0.005, 0.995) // own: as high as outside the dips
	p1 := clamp((p0+min(b, p0))/2, 0.0025, 0.995)                      // load: the excess over b halved
	return float64(t.lowShed)*math.Log(p1/p0) + float64(t.low-t.lowShed)*math.Log((1-p1)/(1-p0))
}

// rising reports the low calls' shed share above the normal calls',
// beyond chance (two standard deviations of their difference).
func (t *trial) rising() bool {
	if t.normal == 0 || t.low == 0 {
		return false
	}
	pl, pn := float64(t.lowShed)/float64(t.low), float64(t.normalShed)/float64(t.normal)
	p := float64(t.lowShed+t.normalShed) / float64(t.low+t.normal)
	return pl-pn > 2*math.Sqrt(p*(1-p)*(1/float64(t.low)+1/float64(t.normal)))
}

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
