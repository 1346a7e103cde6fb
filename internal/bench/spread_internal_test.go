package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPeakIn(t *testing.T) {
	at := func(ms ...int) []time.Time {
		base := time.Unix(0, 0)
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	assert.Equal(t, 0, peakIn(nil, 100*time.Millisecond))
	assert.Equal(t, 3, peakIn(at(0, 50, 99, 100, 250), 100*time.Millisecond), "[0,100) holds 0, 50, 99")
	assert.Equal(t, 2, peakIn(at(0, 100, 200, 250), 100*time.Millisecond))

	s := spreadOf(at(300, 0, 10, 20, 1900), 100*time.Millisecond, 20)
	assert.Equal(t, 5, s.Count)
	assert.Equal(t, 3, s.Peak)
	assert.InDelta(t, 0.25, s.Mean, 1e-9)
	assert.InDelta(t, 12, s.PeakOverMean, 1e-9)
	assert.Equal(t, 20, windowsIn(2*time.Second, 100*time.Millisecond))
	assert.Equal(t, 21, windowsIn(2*time.Second+time.Millisecond, 100*time.Millisecond))
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := percentilesOf(ds)
	assert.Equal(t, 51*time.Millisecond, p.P50)
	assert.Equal(t, 91*time.Millisecond, p.P90)
	assert.Equal(t, 100*time.Millisecond, p.P99)
	assert.Equal(t, 100*time.Millisecond, p.Max)
	assert.Equal(t, Percentiles{}, percentilesOf(nil))
}
