package engine

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A trial's strata: retries count once each side holds minStratum, the drop
// pooled over the strata is the two-proportion test where there is one,
// and the shares a verdict keeps come from enough calls.
func TestATrialsStrata(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		firsts, retries        stratum
		z, share, firstsGround float64
		counted                int
	}{
		{"first attempts alone: the two-proportion test", stratum{normal: 40, normalShed: 10, low: 20, lowShed: 1}, stratum{},
			twoProportion(10, 40, 1, 20), 0.25, 11.0 / 60, 1},
		{"four retries a side: not counted", stratum{normal: 40, normalShed: 10, low: 20, lowShed: 1}, stratum{normal: 4, normalShed: 4, low: 4},
			twoProportion(10, 40, 1, 20), 0.25, 11.0 / 60, 1},
		{"a few first attempts, the retries beside them: the share of every call", stratum{normal: 4, normalShed: 2, low: 3},
			stratum{normal: 36, normalShed: 10, low: 12}, math.NaN(), 12.0 / 40, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := trial{strata: [2]stratum{tt.firsts, tt.retries}}
			assert.Len(t, tr.counted(), tt.counted)
			if !math.IsNaN(tt.z) {
				assert.InDelta(t, tt.z, tr.z(), 1e-9)
			}
			assert.InDelta(t, tt.share, tr.normalShare(10), 1e-9)
			assert.InDelta(t, tt.firstsGround, tr.background(firsts, 10), 1e-9)
		})
	}
}

// Two strata whose low calls are each shed as much as their normal ones
// show no drop, however different the strata's shares: retries that fail
// more than first attempts, and a dip that holds more of them, are not a
// rise.
func TestStrataOfDifferentSharesShowNoDrop(t *testing.T) {
	tr := trial{strata: [2]stratum{{normal: 100, normalShed: 20, low: 10, lowShed: 2}, {normal: 10, normalShed: 8, low: 40, lowShed: 32}}}
	assert.InDelta(t, 0, tr.z(), 1e-9)
	pooled := twoProportion(28, 110, 34, 50)
	assert.Less(t, pooled, -2.0, "pooled as one, the dip looks shed more")
}

// twoProportion is the normal share less the low share over the deviation
// of their difference.
func twoProportion(normalShed, normal, lowShed, low int) float64 {
	pn, pl := float64(normalShed)/float64(normal), float64(lowShed)/float64(low)
	p := float64(normalShed+lowShed) / float64(normal+low)
	return (pn - pl) / math.Sqrt(p*(1-p)*(1/float64(normal)+1/float64(low)))
}

// A verdict of the reads' own needs every stratum shed as much in the dips
// as beside them: the counts of a replica that found its fleet's load its
// reads' own at 16 replicas (its retries' share fell from 49% to 12%, 3.3
// standard deviations) are not steady; the partial mix's are.
func TestAVerdictOfTheReadsOwnNeedsEveryStratumSteady(t *testing.T) {
	for _, tt := range []struct {
		name            string
		firsts, retries stratum
		steady          bool
	}{
		{"16 replicas: first attempts shed more in the dips, retries less", stratum{normal: 131, normalShed: 55, low: 26, lowShed: 18},
			stratum{normal: 117, normalShed: 57, low: 24, lowShed: 3}, false},
		{"the partial mix: as much in the dips, each kind", stratum{normal: 200, normalShed: 46, low: 60, lowShed: 13},
			stratum{normal: 80, normalShed: 30, low: 40, lowShed: 16}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := trial{strata: [2]stratum{tt.firsts, tt.retries}}
			assert.Equal(t, tt.steady, tr.steady())
		})
	}
}
