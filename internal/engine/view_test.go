package engine_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeclock "github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/retry"
)

// clock is a manual clock.
type clock struct{ *fakeclock.Fake }

func (c *clock) advance(d time.Duration) { c.Advance(d) }

func newView(t *testing.T, o engine.Options) (*engine.View, *clock) {
	t.Helper()
	c := &clock{fakeclock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))}
	o.Clock = c
	if o.Rand == nil {
		o.Rand = retry.NewRand(1)
	}
	v, err := engine.New(o)
	require.NoError(t, err)
	return v, c
}

// serve feeds n served calls, the i-th with latency lat(i), calls in flight
// at once, the clock moving on by the latency over inFlight per call (a
// steady stream), and returns how many feedbacks said queued or hold.
func serve(v *engine.View, c *clock, n, inFlight int, lat func(i int) time.Duration) (queued, held int) {
	for i := range n {
		d := lat(i)
		c.advance(d / time.Duration(inFlight))
		fb := v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: d})
		if fb.Queued {
			queued++
		}
		if fb.Hold {
			held++
		}
	}
	return queued, held
}

func uniform(r *rand.Rand, lo, hi time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
}

// lognormal has median m and a long tail: p99 about ten times the median.
func lognormal(r *rand.Rand, m time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return time.Duration(float64(m) * math.Exp(r.NormFloat64())) }
}

// A latency that spreads without a queue is the same at one call in flight
// and at 32: neither a uniform spread nor a long tail is taken for a queue.
func TestASpreadingLatencyIsNoQueue(t *testing.T) {
	for _, tt := range []struct {
		name string
		lat  func(*rand.Rand) func(int) time.Duration
	}{
		{"uniform 5-25ms", func(r *rand.Rand) func(int) time.Duration { return uniform(r, 5*time.Millisecond, 25*time.Millisecond) }},
		{"long-tailed, median 10ms", func(r *rand.Rand) func(int) time.Duration { return lognormal(r, 10*time.Millisecond) }},
	} {
		for _, inFlight := range []int{1, 32} {
			t.Run(tt.name, func(t *testing.T) {
				v, c := newView(t, engine.Options{})
				queued, held := serve(v, c, 50_000, inFlight, tt.lat(rand.New(rand.NewPCG(7, uint64(inFlight)))))
				assert.Zero(t, queued, "at %d in flight", inFlight)
				assert.Zero(t, held)
				assert.False(t, v.Overloaded())
			})
		}
	}
}

// A queue is a median risen past 1.5 times the baseline, two rounds in a
// row: the limit comes down once a round and does not grow meanwhile; once
// the latency is back, so is the verdict.
func TestAQueueShowsInTheMedian(t *testing.T) {
	v, c := newView(t, engine.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	q, _ := serve(v, c, 2000, 8, uniform(r, 9*time.Millisecond, 11*time.Millisecond))
	require.Zero(t, q)
	s := v.Snapshot()
	assert.InDelta(t, 10*time.Millisecond, s.Baseline, float64(time.Millisecond))

	q, held := serve(v, c, 400, 8, uniform(r, 28*time.Millisecond, 32*time.Millisecond))
	assert.Positive(t, q, "a tripled latency for 1.5s is a queue")
	assert.Positive(t, held)
	assert.True(t, v.Overloaded())
	assert.True(t, v.Snapshot().Queued)

	q, held = serve(v, c, 200, 8, uniform(r, 9*time.Millisecond, 11*time.Millisecond))
	assert.LessOrEqual(t, q, 1)
	assert.False(t, v.Overloaded(), "the queue is gone")
	_ = held
}

// A queue is the engine's only while it answers: once nothing is served
// (the end of a backlog, where the reads that always fail are all that is
// left), the last queue it showed does not make their own 503s its load.
func TestAQueueLapsesWhenTheEngineAnswersNoOne(t *testing.T) {
	v, c := newView(t, engine.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	serve(v, c, 2000, 8, uniform(r, 9*time.Millisecond, 11*time.Millisecond))
	serve(v, c, 400, 8, uniform(r, 28*time.Millisecond, 32*time.Millisecond))
	require.True(t, v.Overloaded(), "a tripled latency for 1.5s is a queue")

	// Two reads that always fail, retried: no call is answered.
	for i := range 8 {
		c.advance(30 * time.Millisecond)
		v.Observe(engine.Call{Read: uint64(100_000 + i%2), Failures: uint64(1 + i/2), Answer: engine.Shed})
		if i < 2 {
			assert.True(t, v.Overloaded(), "call %d: the engine answered %s ago", i, time.Duration(i+1)*30*time.Millisecond)
		}
	}
	assert.False(t, v.Overloaded(), "the engine has answered no one for 240ms: its queue is not a verdict on these reads")
	assert.False(t, v.Shedding())
	assert.False(t, v.Snapshot().Queued)

	// Once it answers again, the queue it shows is a verdict again.
	serve(v, c, 1, 8, uniform(r, 28*time.Millisecond, 32*time.Millisecond))
	assert.True(t, v.Overloaded())
}

// One round above the tolerance is noise; only a sustained rise is a queue.
func TestOneSlowRoundIsNoQueue(t *testing.T) {
	v, c := newView(t, engine.Options{MinSamples: 10})
	at := func(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }
	serve(v, c, 100, 4, at(10*time.Millisecond))
	q, held := serve(v, c, 10, 4, at(40*time.Millisecond))
	assert.Zero(t, q)
	assert.Zero(t, held)
	serve(v, c, 100, 4, at(10*time.Millisecond))
	assert.False(t, v.Overloaded())
}

// A burst of slow rounds shorter than QueueFor (a GC, a busy CPU of the
// replica's own) holds the limit but is no queue.
func TestABriefRiseIsNoQueue(t *testing.T) {
	v, c := newView(t, engine.Options{})
	at := func(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }
	serve(v, c, 2000, 8, at(10*time.Millisecond))
	q, held := serve(v, c, 200, 32, at(30*time.Millisecond)) // 190ms
	assert.Zero(t, q)
	assert.Positive(t, held, "the limit holds meanwhile")
	assert.False(t, v.Overloaded())
	serve(v, c, 200, 8, at(10*time.Millisecond))
	assert.False(t, v.Overloaded())
}

// mix feeds 100 reads a round: once of them are shed on their first call
// and served on the next; always of them are shed on their first call and
// on again calls after it.
func mix(v *engine.View, c *clock, rounds, once, always int, again uint64) {
	read := uint64(0)
	served := func(f uint64) {
		v.Observe(engine.Call{Read: read, Failures: f, Answer: engine.Served, Latency: 10 * time.Millisecond})
	}
	for range rounds {
		for i := range 100 {
			read++
			c.advance(time.Millisecond)
			switch {
			case i < once:
				v.Observe(engine.Call{Read: read, Answer: engine.Shed, Latency: 10 * time.Millisecond})
				served(1)
			case i < once+always:
				v.Observe(engine.Call{Read: read, Answer: engine.Shed, Latency: 10 * time.Millisecond})
				for f := range again {
					v.Observe(engine.Call{Read: read, Failures: f + 1, Answer: engine.Shed, Latency: 10 * time.Millisecond})
				}
			default:
				served(0)
			}
		}
	}
}

// Sheds are judged across many reads: each call weighs 2^-(its read's
// earlier failures), so a few reads failing again and again weigh little.
func TestShedsAreJudgedAcrossReads(t *testing.T) {
	tests := []struct {
		name                 string
		once, always         int
		again                uint64
		shedding, overloaded bool
	}{
		{"a fifth of the reads shed once", 20, 0, 0, false, false},
		{"18% shed once, 5% always (5 calls again each)", 18, 5, 5, false, false},
		{"10% always shed (5 calls again each)", 0, 10, 5, false, false},
		{"35% shed once", 35, 0, 0, false, false},
		{"every call shed", 0, 100, 3, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			mix(v, c, 40, tt.once, tt.always, tt.again)
			assert.Equal(t, tt.shedding, v.Shedding(), "shedding, share %.2f", v.Snapshot().ShedShare)
			assert.Equal(t, tt.overloaded, v.Overloaded(), "overloaded")
		})
	}
}

// An engine that fails calls at random, whatever the read, after working on
// them: the share is its rate, retries included.
func TestRandomShedsAreTheEngines(t *testing.T) {
	for _, tt := range []struct {
		p                    float64
		shedding, overloaded bool
	}{{0.1, false, false}, {0.4, true, false}, {0.6, true, true}} {
		v, c := newView(t, engine.Options{})
		r := rand.New(rand.NewPCG(3, 4))
		for read := range uint64(4000) {
			for f := uint64(0); ; f++ {
				c.advance(100 * time.Microsecond)
				if r.Float64() >= tt.p {
					v.Observe(engine.Call{Read: read, Failures: f, Answer: engine.Served, Latency: 10 * time.Millisecond})
					break
				}
				v.Observe(engine.Call{Read: read, Failures: f, Answer: engine.Shed, Latency: 10 * time.Millisecond})
			}
		}
		assert.Equal(t, tt.shedding, v.Shedding(), "shedding at %v, share %.2f", tt.p, v.Snapshot().ShedShare)
		assert.Equal(t, tt.overloaded, v.Overloaded(), "overloaded at %v", tt.p)
	}
}

// Too few calls say nothing.
func TestAFewShedsAreNoVerdict(t *testing.T) {
	v, c := newView(t, engine.Options{})
	for i := range 9 {
		c.advance(time.Millisecond)
		v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed})
	}
	assert.False(t, v.Shedding())
	c.advance(3 * time.Second)
	for i := range 20 {
		c.advance(time.Millisecond)
		v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed})
	}
	assert.True(t, v.Overloaded())
	c.advance(3 * time.Second)
	assert.False(t, v.Overloaded(), "the window has passed")
}

// Retry-After pauses the replica only when the engine throttles broadly:
// several distinct reads, and 3% of the weight, within the window
// while it is overloaded. The
// pause is the longest wait asked, clamped to MaxPause, jittered up to half
// as much again, never past MaxPause.
func TestRetryAfterPausesOnlyABroadThrottle(t *testing.T) {
	const maxPause = 5 * time.Minute
	throttled := func(v *engine.View, read uint64, ra time.Duration) engine.Feedback {
		return v.Observe(engine.Call{Read: read, Answer: engine.Shed, RetryAfter: ra, Quota: true})
	}
	t.Run("one read throttled for a day, among served reads", func(t *testing.T) {
		v, c := newView(t, engine.Options{MaxPause: maxPause})
		mix(v, c, 5, 0, 0, 0)
		for range 5 {
			c.advance(time.Millisecond)
			assert.Zero(t, throttled(v, 1, 24*time.Hour).Pause)
		}
	})
	t.Run("one read in four throttled", func(t *testing.T) {
		v, c := newView(t, engine.Options{MaxPause: maxPause})
		for i := range 400 {
			c.advance(time.Millisecond)
			if i%4 == 0 {
				assert.Zero(t, throttled(v, uint64(i), 2*time.Second).Pause)
				continue
			}
			v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: 10 * time.Millisecond})
		}
	})
	t.Run("every read throttled", func(t *testing.T) {
		v, c := newView(t, engine.Options{MaxPause: maxPause, Rand: retry.NewRand(9)})
		var pauses []time.Duration
		for i := range 40 {
			c.advance(time.Millisecond)
			if p := throttled(v, uint64(i), 2*time.Second).Pause; p > 0 {
				pauses = append(pauses, p)
			}
		}
		want := 2*time.Second + time.Duration(retry.NewRand(9).Int64N(int64(time.Second)+1))
		assert.Equal(t, []time.Duration{want}, pauses, "one pause, the seed's jitter; none again while it lasts")
	})
	t.Run("an overloaded engine with Retry-After on a few of its sheds", func(t *testing.T) {
		// The bench's capacity engine: Retry-After on a fifth of its sheds,
		// which are 5-8% of one replica's calls. Here 60% are shed, one in
		// 40 of them with a Retry-After: 1.5% of the weight, under the 3%
		// of ThrottleShare, though from many distinct reads.
		for _, tt := range []struct {
			every int // one shed in every is throttled
			pause bool
		}{{40, false}, {1, true}} {
			v, c := newView(t, engine.Options{MaxPause: maxPause})
			paused := false
			for i := range 1000 {
				c.advance(time.Millisecond)
				switch {
				case i%5 >= 3:
					v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: 10 * time.Millisecond})
				case (i/5*3+i%5+1)%tt.every == 0:
					fb := v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed, RetryAfter: time.Second})
					paused = paused || fb.Pause > 0
				default:
					v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed})
				}
			}
			assert.True(t, v.Overloaded())
			assert.Equal(t, tt.pause, paused, "Retry-After on one shed in %d", tt.every)
		}
	})
	t.Run("a day asked for broadly is clamped", func(t *testing.T) {
		v, c := newView(t, engine.Options{MaxPause: maxPause})
		var longest time.Duration
		for i := range 40 {
			c.advance(time.Millisecond)
			longest = max(longest, throttled(v, uint64(i), 24*time.Hour).Pause)
		}
		assert.Equal(t, maxPause, longest)
	})
	t.Run("without MaxPause, never", func(t *testing.T) {
		v, c := newView(t, engine.Options{})
		for i := range 40 {
			c.advance(time.Millisecond)
			assert.Zero(t, throttled(v, uint64(i), time.Second).Pause)
		}
	})
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []engine.Options{
		{ShedShare: 0.6, OverloadShare: 0.5}, {ShedShare: 1.5}, {Tolerance: 0.9}, {MaxPause: -1},
	} {
		_, err := engine.New(o)
		assert.Error(t, err, "%+v", o)
	}
}

// A shed answered at once, before any work, is a load shedder's; a 503
// that took the engine's usual time is the read's own.
func TestFastShedsAreLoadSheds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		latency    time.Duration
		overloaded bool
	}{{"15% shed at once", 100 * time.Microsecond, true}, {"15% shed after the usual 10ms", 10 * time.Millisecond, false}} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			for i := range 2000 {
				c.advance(500 * time.Microsecond)
				if i > 200 && i%100 < 15 {
					v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed, Latency: tt.latency})
					continue
				}
				v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: 10 * time.Millisecond})
			}
			assert.Equal(t, tt.overloaded, v.Overloaded())
			assert.False(t, v.Shedding() && !tt.overloaded, "15% is not broad shedding")
		})
	}
}

// TestAWallClockStepKeepsNoStaleShare: the view's windows run on the
// monotonic clock. On the wall clock, a step back left the slots of the
// sheds before it counted until the wall clock caught up: an engine that
// shed a minute ago, then serves everyone, still looked overloaded.
func TestAWallClockStepKeepsNoStaleShare(t *testing.T) {
	tests := []struct {
		name string
		step time.Duration
	}{
		{"no step", 0},
		{"back a minute", -time.Minute},
		{"forward a minute", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			for i := range 50 {
				v.Observe(engine.Call{Read: uint64(i), Answer: engine.Shed, Latency: 5 * time.Millisecond})
				c.advance(40 * time.Millisecond)
			}
			require.True(t, v.Overloaded(), "50 sheds in the window")
			c.Step(tt.step)
			c.advance(3 * time.Second) // past the 2s window
			for i := range 20 {
				v.Observe(engine.Call{Read: uint64(100 + i), Answer: engine.Served, Latency: 5 * time.Millisecond})
			}
			assert.Zero(t, v.Snapshot().ShedShare, "the sheds are out of the window")
			assert.False(t, v.Overloaded())
		})
	}
}
