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
// length, and the calls sent during a dip (low) are set against those sent
// outside them (normal): first attempts against first attempts, retries
// against retries. Every replica of a fleet dips on the same
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
//
// Retries are a stratum of their own: a retry is a read chosen by its own
// failure (those that always fail are retried most), and the limiter
// grants retries first, so a dip holds more of them than the span beside
// it; set against first attempts, a dip of retries looks shed more, a dip
// of first attempts less, whatever the load. Set against the retries sent
// beside them, they are evidence like any call: a replica of a large
// fleet, at a call or two in flight, sends mostly retries in its dips
// (its sheds come back as retries), 3.3 first attempts a dip at the
// median at 16 replicas against the capacity engine, and on first attempts
// alone its trials took 2 to 16 dips.
type trial struct {
	on     bool
	began  time.Duration // monotonic
	dips   int
	dipEnd time.Duration // the end of the last dip asked for (monotonic; 0: none yet)
	// The calls counted, by stratum: first attempts, and retries.
	strata  [2]stratum
	lastLow bool // the last call counted was low
}

// stratum is one kind of call in a trial: low and normal calls, how many
// of each were shed, and the sum of the calls in flight when each was sent.
type stratum struct {
	normal, normalShed, normalFlight int
	low, lowShed, lowFlight          int
}

// Strata of a trial's calls.
const (
	firsts  = 0
	retried = 1
)

// start begins a trial at now. Its evidence is the calls answered from
// then on, low and normal alike: the window that raised the suspicion is
// older than the dips, and where failures come in a burst (reads of one
// head-end, one tariff) it would set the first dips against an earlier
// engine.
func (t *trial) start(now time.Duration) {
	*t = trial{on: true, began: now}
}

// add counts a call answered during the trial, sent with inFlight calls in
// flight, in its stratum.
func (t *trial) add(s int, low, shed bool, inFlight int) {
	st := &t.strata[s]
	switch {
	case low:
		st.low++
		st.lowFlight += inFlight
		if shed {
			st.lowShed++
		}
	default:
		st.normal++
		st.normalFlight += inFlight
		if shed {
			st.normalShed++
		}
	}
}

// counted is the trial's strata that count: first attempts always, and
// retries once each side holds minStratum of them.
func (t *trial) counted() []stratum {
	if r := t.strata[retried]; r.low >= minStratum && r.normal >= minStratum {
		return t.strata[:]
	}
	return t.strata[:1]
}

// minStratum is the fewest calls a side a stratum of retries is counted
// on: a share of two or three calls is all chance, and with the retries of
// reads that always fail it may be all sheds.
const minStratum = 5

// sums is the counted strata taken together.
func (t *trial) sums() stratum {
	var a stratum
	for _, s := range t.counted() {
		a.normal += s.normal
		a.normalShed += s.normalShed
		a.normalFlight += s.normalFlight
		a.low += s.low
		a.lowShed += s.lowShed
		a.lowFlight += s.lowFlight
	}
	return a
}

// lows and normals are the calls counted on each side.
func (t *trial) lows() int     { return t.sums().low }
func (t *trial) normals() int  { return t.sums().normal }
func (t *trial) lowSheds() int { return t.sums().lowShed }

// minHalved is the fewest calls in flight, on average outside the dips,
// that a dip can halve to some effect.
const minHalved = 4

// halved reports that the dips lowered the calls in flight to at most
// 0.6 of what they were outside them, from minHalved or more; calls whose
// in flight is not known (0) are taken as halved.
func (t *trial) halved() bool {
	a := t.sums()
	if a.normal == 0 || a.low == 0 || a.normalFlight == 0 {
		return a.normalFlight == 0
	}
	n, l := float64(a.normalFlight)/float64(a.normal), float64(a.lowFlight)/float64(a.low)
	return n >= minHalved && l <= 0.6*n
}

// flight is the calls in flight, on average, when the normal calls were
// sent (0: not known).
func (t *trial) flight() float64 {
	a := t.sums()
	if a.normal == 0 {
		return 0
	}
	return float64(a.normalFlight) / float64(a.normal)
}

// odds is the log-likelihood ratio of load over the reads' own, given the
// background shares b of each stratum: positive says load.
func (t *trial) odds(b [2]float64) float64 {
	sum := 0.0
	for i, s := range t.counted() {
		if s.normal == 0 || s.low == 0 {
			continue
		}
		// Own: as high as outside the dips. Load: the excess over b halved, or,
		// of an engine refusing more than half of what it is sent (a capacity
		// overrun more than twice over), what is left past its capacity when
		// the load halves (2p0-1: halving 6 times its capacity leaves 3 times).
		p0 := clamp(float64(s.normalShed)/float64(s.normal), 0.005, 0.995)
		p1 := clamp(max((p0+min(b[i], p0))/2, 2*p0-1), 0.0025, 0.995)
		sum += float64(s.lowShed)*math.Log(p1/p0) + float64(s.low-s.lowShed)*math.Log((1-p1)/(1-p0))
	}
	return sum
}

// z is the normal calls' shed share less the low calls', in standard
// deviations of their difference, stratum by stratum (Cochran, Mantel and
// Haenszel: the low calls' sheds short of what the pooled share of their
// stratum predicts, over its deviation; a two-proportion test where there
// is one stratum; 0 without both).
func (t *trial) z() float64 {
	d, v := 0.0, 0.0
	for _, s := range t.counted() {
		if s.normal == 0 || s.low == 0 {
			continue
		}
		n, l := float64(s.normal), float64(s.low)
		p := float64(s.lowShed+s.normalShed) / (n + l)
		d += l*p - float64(s.lowShed)
		v += p * (1 - p) * l * n / (n + l)
	}
	if v == 0 {
		return 0
	}
	return d / math.Sqrt(v)
}

// rising reports the low calls' shed share above the normal calls',
// beyond chance (two standard deviations of their difference).
func (t *trial) rising() bool { return t.z() < -2 }

// steady reports that no counted stratum's shed share fell in the dips
// beyond chance (steadyZ standard deviations): a verdict of the reads' own
// needs each kind of call shed as much when the fleet sends less. Summed,
// the odds of one stratum can outweigh another's drop: at 16 replicas a
// replica's first attempts were shed 69% in its dips against 42% beside
// them while its retries were shed 12% against 49% (3.3 standard
// deviations), and the odds together found the reads' own; its limit set
// back and grown to 32, the fleet shed half its calls and dead-lettered
// 320 reads.
func (t *trial) steady() bool {
	for _, s := range t.counted() {
		if s.z() >= steadyZ {
			return false
		}
	}
	return true
}

// steadyZ is the drop in one stratum that a verdict of the reads' own may
// not have: 2.5 standard deviations, over two strata about as often crossed
// by chance as two over one (at two, the partial mix's trials took 3.79
// dips against 3.75 in a closed-loop simulation, and one of 1,000 reads
// failing on their own ended undecided).
const steadyZ = 2.5

// z is the stratum's normal share less its low share, in standard
// deviations of their difference (0 without both).
func (s stratum) z() float64 {
	t := trial{strata: [2]stratum{s}}
	return t.z()
}

// share is stratum s's normal calls' shed share, pooled with the low ones
// when the reads are found at fault (the shares are the same then).
func (t *trial) share(s int, pooled bool) float64 {
	st := t.strata[s]
	n, sh := st.normal, st.normalShed
	if pooled {
		n, sh = n+st.low, sh+st.lowShed
	}
	if n == 0 {
		return 0
	}
	return float64(sh) / float64(n)
}

// normalShare is the first attempts' share shed outside the dips, on at
// least least of them; on fewer, that of every counted call outside the
// dips (a verdict reached mostly on retries, at a call or two in flight).
func (t *trial) normalShare(least int) float64 {
	if t.strata[firsts].normal >= least {
		return t.share(firsts, false)
	}
	a := t.sums()
	if a.normal == 0 {
		return 0
	}
	return float64(a.normalShed) / float64(a.normal)
}

// background is stratum s's share shed that a verdict of the reads' own
// found theirs: its share pooled, on at least least calls; 0 on fewer (a
// verdict reached on retries, with a few first attempts beside them, says
// little of the first attempts' share, and taken high, it would charge
// the engine's sheds to the reads for as long as the verdict stands).
func (t *trial) background(s, least int) float64 {
	if st := t.strata[s]; st.normal+st.low < least {
		return 0
	}
	return t.share(s, true)
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(x, hi)) }

// nextDip is when the next dip starts, as an offset from now, given the
// wall clock: the next multiple of every after it.
func nextDip(wall time.Time, every time.Duration) time.Duration {
	next := wall.Truncate(every).Add(every)
	return next.Sub(wall)
}
