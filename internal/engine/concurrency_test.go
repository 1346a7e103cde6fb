package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/engine"
)

// calls feeds n first attempts made with inFlight calls in flight, each
// shed with probability shed(inFlight) after lat, or served after lat.
func calls(v *engine.View, c *clock, r *rand.Rand, n, inFlight int, shed func(int) float64, lat time.Duration) {
	for i := range n {
		c.advance(lat / time.Duration(inFlight))
		a := engine.Served
		if r.Float64() < shed(inFlight) {
			a = engine.Shed
		}
		v.Observe(engine.Call{Read: uint64(i), Answer: a, Latency: lat, InFlight: inFlight})
	}
}

// Sheds that do not answer to concurrency are the reads' own: an engine
// that sheds 60% of the reads at one call in flight as at 32 is not
// relieved by fewer calls, and is not overloaded. An engine that sheds
// only past its capacity is.
func TestShedsThatDoNotAnswerToConcurrencyAreTheReads(t *testing.T) {
	for _, tt := range []struct {
		name       string
		shed       func(inFlight int) float64
		overloaded bool
	}{
		{"60% of reads fail at any concurrency", func(int) float64 { return 0.6 }, false},
		{"nothing shed up to 8 in flight, 60% past it", func(n int) float64 {
			if n > 8 {
				return 0.6
			}
			return 0
		}, true},
		{"20% of reads fail, and 60% of the rest past 8 in flight", func(n int) float64 {
			if n > 8 {
				return 0.2 + 0.8*0.6
			}
			return 0.2
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			r := rand.New(rand.NewPCG(5, 6))
			for _, n := range []int{1, 2, 4, 8} { // a limit in slow start
				calls(v, c, r, 100, n, tt.shed, 10*time.Millisecond)
			}
			calls(v, c, r, 2000, 32, tt.shed, 10*time.Millisecond)
			assert.Equal(t, tt.overloaded, v.Overloaded(), "share %.2f", v.Snapshot().ShedShare)
			assert.Equal(t, tt.overloaded, v.Shedding())
		})
	}
}

// Without calls at fewer in flight to compare with, a broad shed is taken
// for load (so that the limit comes down and learns); once the lower
// concurrency has shown the same share, it is the reads'.
func TestABroadShedIsLoadUntilFewerCallsShowOtherwise(t *testing.T) {
	v, c := newView(t, engine.Options{})
	r := rand.New(rand.NewPCG(8, 9))
	sixty := func(int) float64 { return 0.6 }
	calls(v, c, r, 400, 16, sixty, 10*time.Millisecond)
	assert.True(t, v.Overloaded(), "nothing known below 16 in flight")
	calls(v, c, r, 200, 8, sixty, 10*time.Millisecond)
	calls(v, c, r, 400, 16, sixty, 10*time.Millisecond)
	assert.False(t, v.Overloaded(), "8 in flight shed as much")
}

// At the limit's least concurrency, nothing can be relieved by fewer calls:
// its sheds are the reads'.
func TestShedsAtTheLeastConcurrencyAreTheReads(t *testing.T) {
	v, c := newView(t, engine.Options{LeastInFlight: 4})
	r := rand.New(rand.NewPCG(10, 11))
	calls(v, c, r, 400, 4, func(int) float64 { return 0.6 }, 10*time.Millisecond)
	assert.False(t, v.Overloaded())
}

// Sheds that grew as the calls in flight fell are no load: at the end of a
// backlog, the reads that always fail are most of what is called, at fewer
// calls in flight than the backlog was drained with.
func TestShedsThatGrowAsConcurrencyFallsAreNoLoad(t *testing.T) {
	v, c := newView(t, engine.Options{})
	r := rand.New(rand.NewPCG(1, 1))
	calls(v, c, r, 2000, 32, func(int) float64 { return 0.2 }, 10*time.Millisecond)
	for read := range uint64(300) {
		c.advance(5 * time.Millisecond)
		a := engine.Served
		if read%3 > 0 {
			a = engine.Shed
		}
		v.Observe(engine.Call{Read: read, Failures: 1 + read%4, Answer: a, Latency: 10 * time.Millisecond, InFlight: 6})
	}
	assert.False(t, v.Shedding(), "share %.2f", v.Snapshot().ShedShare)
	assert.False(t, v.Overloaded())

	o, oc := newView(t, engine.Options{})
	calls(o, oc, r, 2000, 32, func(int) float64 { return 0.8 }, 10*time.Millisecond)
	calls(o, oc, r, 300, 6, func(int) float64 { return 0.7 }, 10*time.Millisecond)
	assert.True(t, o.Overloaded(), "fewer calls, fewer sheds")
}

// A shed is fast, a load shedder's refusal, when it is answered in under
// half the engine's quickest usual answers (its 10th percentile): the lower
// end of a spreading latency is not fast.
func TestTheLowEndOfASpreadIsNotAFastShed(t *testing.T) {
	for _, tt := range []struct {
		name       string
		shedAfter  func(r *rand.Rand) time.Duration
		overloaded bool
	}{
		{"a fifth shed within the spread", func(r *rand.Rand) time.Duration {
			return 5*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond)))
		}, false},
		{"a fifth shed at once", func(*rand.Rand) time.Duration { return 200 * time.Microsecond }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			r := rand.New(rand.NewPCG(12, 13))
			for i := range 4000 {
				c.advance(500 * time.Microsecond)
				lat := 5*time.Millisecond + time.Duration(r.Int64N(int64(40*time.Millisecond)))
				if i > 400 && i%100 < 20 {
					v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed, Latency: tt.shedAfter(r)})
					continue
				}
				v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: lat})
			}
			assert.Equal(t, tt.overloaded, v.Overloaded())
		})
	}
}

// Where retries are most of what is called, only a refusal before any work
// says the engine turned them away: the reads that always fail, answered
// 503 after the usual work, are theirs; a load shedder's 503 at once is load.
func TestRetriesAloneCountOnlyFastSheds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		latency    time.Duration
		overloaded bool
	}{{"503 after the usual work", 10 * time.Millisecond, false}, {"503 at once", 100 * time.Microsecond, true}} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			calls(v, c, rand.New(rand.NewPCG(1, 2)), 400, 8, func(int) float64 { return 0 }, 10*time.Millisecond)
			c.advance(3 * time.Second)
			for read := range uint64(200) {
				c.advance(time.Millisecond)
				v.Observe(engine.Call{Read: read, Failures: 1 + read%3, Answer: engine.Shed, Latency: tt.latency, InFlight: 8})
			}
			assert.Equal(t, tt.overloaded, v.Overloaded())
			assert.Equal(t, tt.overloaded, v.Shedding())
		})
	}
}
