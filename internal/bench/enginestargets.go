package bench

import (
	"math"
	"slices"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// The engine matrix's targets, as numbers: each cell's rows judge its
// figures with these.
const (
	// matrixGoodput is the share of a bare client's healthy goodput the
	// product should reach, and of C a fleet against the capacity engine.
	matrixGoodput = 0.9
	// matrixShed is the most of its calls a fleet may see shed against the
	// capacity engine.
	matrixShed = 0.1
	// matrixLateness bounds the retries' lateness at the 99th percentile.
	matrixLateness = 100 * time.Millisecond
	// matrixRecallMin and matrixRecallMax bound the gap from a 429 with
	// Retry-After: 1 to its read's next call.
	matrixRecallMin = time.Second
	matrixRecallMax = 1500 * time.Millisecond
	// matrixLimitShare is the least share of its bound the fleet's limit
	// should hold (its median) against an engine that fails calls at random
	// whatever the load.
	matrixLimitShare = 0.9
	// matrixSigmas is the width of the binomial band around the reads
	// expected exhausted by chance, in standard deviations.
	matrixSigmas = 3
	// matrixJoinShare is the least share of its fair share (C over the
	// clients and the replica) a replica joining a full engine should bill:
	// the bench's bar, not the issue's.
	matrixJoinShare = 0.5
	// matrixRecovery is how soon after an outage ends every read should be
	// billed.
	matrixRecovery = 5 * time.Second
)

// longestChain is the most a read that fails every attempt may wait
// between its first call and its last: the sum of the policy's ceilings
// after attempts 1 to MaxAttempts-1 (15.5s for the production policy).
func longestChain(p retry.Policy) time.Duration {
	var d time.Duration
	for a := 1; a < p.MaxAttempts; a++ {
		d += p.Ceiling(uint64(a))
	}
	return d
}

// binomialBand is the mean of a binomial of n trials of chance p, and the
// band of k standard deviations either side of it, its low end at least 0.
func binomialBand(n int, p, k float64) (mean, lo, hi float64) {
	mean = float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return mean, max(0, mean-k*sd), mean + k*sd
}

// inBand reports whether a count lies in [lo, hi].
func inBand(v int, lo, hi float64) bool {
	return float64(v) >= lo && float64(v) <= hi
}

// Gaps are the gaps of a set of reads from their first call's answer to
// their second call: Count measured, Missing not (a read called once).
type Gaps struct {
	Count   int           `json:"count"`
	Missing int           `json:"missing"`
	Min     time.Duration `json:"min_ns"`
	P50     time.Duration `json:"p50_ns"`
	Max     time.Duration `json:"max_ns"`
}

// within reports whether there is a gap, none is missing, and every one is
// in [lo, hi] (hi 0: no upper bound).
func (g Gaps) within(lo, hi time.Duration) bool {
	return g.Count > 0 && g.Missing == 0 && g.Min >= lo && (hi == 0 || g.Max <= hi)
}

// recallGaps are the gaps of the reads of kind k (by index into kinds; read
// i's key is Key(i)): from the answer of each one's first call to its
// second.
func recallGaps(ledger map[string][]simengine.Call, kinds []readKind, k readKind) Gaps {
	var ds []time.Duration
	missing := 0
	for i, kind := range kinds {
		if kind != k {
			continue
		}
		calls := ledger[Key(i)]
		if len(calls) < 2 {
			missing++
			continue
		}
		ds = append(ds, calls[1].At.Sub(answered(calls[0])))
	}
	g := Gaps{Count: len(ds), Missing: missing}
	if len(ds) > 0 {
		slices.Sort(ds)
		g.Min, g.P50, g.Max = ds[0], ds[len(ds)/2], ds[len(ds)-1]
	}
	return g
}

// goodputRatio is the product's goodput over the bare client's, and whether
// it met target: both billed every healthy read, and the ratio reached it.
func goodputRatio(product, bare float64, productDone, bareDone bool, target float64) (float64, bool) {
	if bare <= 0 {
		return 0, false
	}
	r := product / bare
	return r, productDone && bareDone && r >= target
}

// attemptsMet reports whether every always-failing read was called exactly
// attempts times and all of them were dead-lettered exhausted.
func attemptsMet(callsMin, callsMax, attempts, exhausted, total int) bool {
	return total > 0 && callsMin == attempts && callsMax == attempts && exhausted == total
}

// billedFrom is the healthy goodput of a phase that starts at from: the
// bills answered at or after from, over the time from from to the last of
// them. A phase billed entirely before from is measured from start instead
// (a run too small to measure past its first second).
func billedFrom(ledger map[string][]simengine.Call, start, from time.Time) (billed int, perSec float64) {
	n, last := bills(ledger, from)
	if n == 0 {
		from = start
		n, last = bills(ledger, from)
	}
	if n == 0 || !last.After(from) {
		return n, 0
	}
	return n, float64(n) / last.Sub(from).Seconds()
}

// bills counts the bills of the ledger answered at or after since, and
// says when the last of them was (zero for none).
func bills(ledger map[string][]simengine.Call, since time.Time) (n int, last time.Time) {
	for _, calls := range ledger {
		for _, c := range calls {
			if at := answered(c); c.Outcome == simengine.Billed && !at.Before(since) {
				n++
				if at.After(last) {
					last = at
				}
			}
		}
	}
	return n, last
}
