package engine_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/engine"
)

// calls feeds n first attempts made inFlight at a time, each shed with
// probability shed after lat, or served after lat.
func calls(v *engine.View, c *clock, r *rand.Rand, n, inFlight int, shed float64, lat time.Duration) {
	for i := range n {
		c.advance(lat / time.Duration(inFlight))
		a := engine.Served
		if r.Float64() < shed {
			a = engine.Shed
		}
		v.Observe(engine.Call{Read: uint64(i), Answer: a, Latency: lat})
	}
}

// A shed is fast, a load shedder's refusal, when it is answered in under
// half the latency baseline more often than the engine's answers are: the
// lower end of a spreading latency is not fast, a refusal at once is.
func TestTheLowEndOfASpreadIsNotAFastShed(t *testing.T) {
	for _, tt := range []struct {
		name       string
		shedAfter  func(r *rand.Rand) time.Duration
		overloaded bool
	}{
		{"a fifth shed within the spread", func(r *rand.Rand) time.Duration {
			return 5*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond)))
		}, false},
		{"a fifth shed within a long tail like the answers'", func(r *rand.Rand) time.Duration {
			return time.Duration(float64(10*time.Millisecond) * math.Exp(r.NormFloat64()))
		}, false},
		{"a fifth shed at once", func(*rand.Rand) time.Duration { return 200 * time.Microsecond }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			r := rand.New(rand.NewPCG(12, 13))
			for i := range 4000 {
				c.advance(500 * time.Microsecond)
				lat := 5*time.Millisecond + time.Duration(r.Int64N(int64(40*time.Millisecond)))
				if strings.Contains(tt.name, "long tail") {
					lat = time.Duration(float64(10*time.Millisecond) * math.Exp(r.NormFloat64()))
				}
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
			calls(v, c, rand.New(rand.NewPCG(1, 2)), 400, 8, 0, 10*time.Millisecond)
			c.advance(3 * time.Second)
			for read := range uint64(200) {
				c.advance(time.Millisecond)
				v.Observe(engine.Call{Read: read, Failures: 1 + read%3, Answer: engine.Shed, Latency: tt.latency})
			}
			assert.Equal(t, tt.overloaded, v.Overloaded())
			assert.Equal(t, tt.overloaded, v.Shedding())
		})
	}
}

// An engine that sheds while it answers others is serving: its sheds are
// load or the reads' own, not an outage. One that answers no one is not.
func TestAnEngineThatAnswersOthersIsServing(t *testing.T) {
	for _, tt := range []struct {
		shed    float64
		serving bool
	}{{0.5, true}, {0.85, true}, {0.97, false}, {1, false}} {
		v, c := newView(t, engine.Options{})
		calls(v, c, rand.New(rand.NewPCG(3, 3)), 400, 16, tt.shed, 10*time.Millisecond)
		assert.Equal(t, tt.serving, v.Serving(), "%v shed", tt.shed)
	}
}

// An engine that has just gone down is not serving, whatever it answered in
// the seconds before.
func TestAnEngineJustDownIsNotServing(t *testing.T) {
	v, c := newView(t, engine.Options{})
	calls(v, c, rand.New(rand.NewPCG(4, 4)), 400, 16, 0, 10*time.Millisecond)
	assert.True(t, v.Serving())
	for read := range uint64(20) {
		c.advance(10 * time.Millisecond)
		v.Observe(engine.Call{Read: 1000 + read, Answer: engine.Shed, Latency: time.Millisecond})
	}
	assert.False(t, v.Serving(), "nothing answered for 200ms")
}

// Down, for one read: another read's first attempt failed after the engine
// had answered no one for 100ms (four baselines), and nothing since.
func TestDownIsOtherFreshReadsFailingInAQuiet(t *testing.T) {
	shed := func(read, failures uint64) engine.Call {
		return engine.Call{Read: read, Failures: failures, Answer: engine.Shed, Latency: time.Millisecond}
	}
	served := engine.Call{Read: 99, Answer: engine.Served, Latency: time.Millisecond}
	tests := []struct {
		name  string
		calls []engine.Call // 10ms apart
		after time.Duration // after the last call
		down  bool
	}{
		{"never answered, another read failed fresh", []engine.Call{shed(1, 0), shed(2, 0)}, 0, true},
		{"only the read itself failed", []engine.Call{shed(1, 0), shed(1, 1), shed(1, 2)}, 0, false},
		{"another read failed, but only on a retry", []engine.Call{shed(1, 0), shed(2, 3)}, 0, false},
		{"another read failed fresh right after an answer", []engine.Call{served, shed(2, 0), shed(1, 3)}, 0, false},
		{"another read failed fresh after 100ms of quiet", append([]engine.Call{served}, quiet(11, shed(2, 0))...), 0, true},
		{"answered since", append(append([]engine.Call{served}, quiet(11, shed(2, 0))...), served), 0, false},
		{"the failure is older than the window", []engine.Call{shed(2, 0)}, 2100 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			for _, call := range tt.calls {
				c.advance(10 * time.Millisecond)
				v.Observe(call)
			}
			c.advance(tt.after)
			assert.Equal(t, tt.down, v.Down(1))
		})
	}
}

// quiet is n-1 empty ticks of 10ms (calls the engine never saw) then call.
func quiet(n int, call engine.Call) []engine.Call {
	out := make([]engine.Call, 0, n)
	for range n - 1 {
		out = append(out, engine.Call{Answer: engine.Cut})
	}
	return append(out, call)
}

// Retries' sheds count only up to the share of first attempts shed beside
// them. As a backlog ends, the first attempts (a fifth failing on their
// own) thin out while the retries of the reads that always fail remain,
// shed every time: taken at face value they make an engine that serves
// every other read look overloaded. An engine that sheds everyone sheds
// first attempts as much, and its retries count in full.
func TestRetriesCountNoMoreThanFirstAttemptsShed(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		freshShed            int // of each 10 first attempts
		shedding, overloaded bool
	}{
		{"a fifth of first attempts fail on their own", 2, false, false},
		{"every first attempt shed", 10, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			// 100 first attempts and 180 retries (weight 90), over 1.4s; the
			// retries and the first attempts shed are answered 503 after the
			// usual work.
			fresh := 0
			for i := range 280 {
				c.advance(5 * time.Millisecond)
				call := engine.Call{Read: uint64(i), Answer: engine.Shed, Latency: 10 * time.Millisecond}
				if i%14 < 5 {
					if fresh%10 >= tt.freshShed {
						call.Answer = engine.Served
					}
					fresh++
				} else {
					call.Failures = 1
				}
				v.Observe(call)
			}
			s := v.Snapshot()
			assert.Equal(t, tt.shedding, v.Shedding(), "shedding, share %.2f", s.ShedShare)
			assert.Equal(t, tt.overloaded, v.Overloaded(), "overloaded, share %.2f", s.ShedShare)
		})
	}
}

// As a backlog ends, the few reads that always fail are most of what is
// called, and their 503s, answered after the usual work, are quick as
// often as the engine's 200s are: by chance alone a share of them a
// little past 5% is quick beyond that. Only an excess beyond chance is a
// load shedder's.
func TestAFewSlowShedsAreNotFastByChance(t *testing.T) {
	flipped := 0
	for seed := range uint64(50) {
		v, c := newView(t, engine.Options{})
		r := rand.New(rand.NewPCG(seed, 77))
		lat := lognormal(r, 10*time.Millisecond)
		serve(v, c, 400, 8, lat)
		c.advance(3 * time.Second)
		for read := range uint64(60) {
			c.advance(10 * time.Millisecond)
			v.Observe(engine.Call{Read: read, Failures: 1, Answer: engine.Shed, Latency: lat(0)})
		}
		if v.Overloaded() {
			flipped++
		}
	}
	assert.Zero(t, flipped, "of 50 seeds")

	v, c := newView(t, engine.Options{})
	serve(v, c, 400, 8, lognormal(rand.New(rand.NewPCG(1, 77)), 10*time.Millisecond))
	c.advance(3 * time.Second)
	for read := range uint64(60) {
		c.advance(10 * time.Millisecond)
		v.Observe(engine.Call{Read: read, Failures: 1, Answer: engine.Shed, Latency: 100 * time.Microsecond})
	}
	assert.True(t, v.Overloaded(), "60 retries refused at once")
}

// A run's first calls are few: a third of a dozen shed is what a fifth of
// reads failing on their own gives often enough, and says nothing about the
// engine. A broad shed is past chance however few the calls, and so is a
// share a little past ShedShare over many.
func TestAShareOfAFewCallsIsNotBroadByChance(t *testing.T) {
	tests := []struct {
		name        string
		calls, shed int
		shedding    bool
	}{
		{"4 of 13 first calls shed", 13, 4, false},
		{"6 of 19 first calls shed", 19, 6, false},
		{"12 of 40 first calls shed", 40, 12, false},
		{"every one of 12 first calls shed", 12, 12, true},
		{"9 of 12 first calls shed", 12, 9, true},
		{"400 of 1000 first calls shed", 1000, 400, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			for i := range tt.calls {
				c.advance(time.Millisecond)
				a := engine.Served
				if i*tt.shed/tt.calls != (i+1)*tt.shed/tt.calls { // spread evenly
					a = engine.Shed
				}
				v.Observe(engine.Call{Read: uint64(i), Answer: a, Latency: 10 * time.Millisecond})
			}
			assert.Equal(t, tt.shedding, v.Shedding(), "shedding, share %.2f", v.Snapshot().ShedShare)
		})
	}
}
