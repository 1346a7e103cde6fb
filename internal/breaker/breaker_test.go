package breaker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
	fakeclock "github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/retry"
)

// clock is a manual clock and timer.
type clock struct {
	*fakeclock.Fake
	mu    sync.Mutex
	fire  func()
	waits []time.Duration
}

func (c *clock) advance(d time.Duration) { c.Advance(d) }
func (c *clock) AfterFunc(d time.Duration, f func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fire, c.waits = f, append(c.waits, d)
	return func() {}
}
func (c *clock) coolDownOver() {
	c.mu.Lock()
	f := c.fire
	c.mu.Unlock()
	f()
}

type transition struct{ from, to breaker.State }

func newBreaker(t *testing.T) (*breaker.Breaker, *clock, *[]transition) {
	t.Helper()
	c := &clock{Fake: fakeclock.NewFake(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))}
	var mu sync.Mutex
	var changes []transition
	b, err := breaker.New(breaker.Options{
		Window: 10 * time.Second, MinCalls: 10, FailureRatio: 0.5, CoolDown: 4 * time.Second,
		MaxCoolDown: 16 * time.Second, Probes: 2, Rand: retry.NewRand(1), Clock: c, AfterFunc: c.AfterFunc,
	})
	require.NoError(t, err)
	b.OnChange(func(from, to breaker.State) {
		mu.Lock()
		changes = append(changes, transition{from, to})
		mu.Unlock()
	})
	return b, c, &changes
}

func call(t *testing.T, b *breaker.Breaker, failed bool) {
	t.Helper()
	p, err := b.Acquire(t.Context(), true)
	require.NoError(t, err)
	b.Done(p, failed)
}

// The functions added with OnChange are called after each transition, in
// the order they were added.
func TestOnChangeCallsTheFunctionsInTheOrderAdded(t *testing.T) {
	b, _, changes := newBreaker(t)
	var seen []int
	b.OnChange(func(breaker.State, breaker.State) { seen = append(seen, len(*changes)) })
	for range 10 {
		call(t, b, true)
	}
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, []int{1}, seen, "called once, after the function added before it")
}

func TestOpensOnFailureShareWithMinimumCalls(t *testing.T) {
	b, c, changes := newBreaker(t)
	for range 9 {
		call(t, b, true)
	}
	assert.Equal(t, breaker.Closed, b.State(), "9 failures are below the minimum number of calls")
	call(t, b, true)
	assert.Equal(t, breaker.Open, b.State())
	assert.Equal(t, []transition{{breaker.Closed, breaker.Open}}, *changes)
	require.Len(t, c.waits, 1)
	assert.GreaterOrEqual(t, c.waits[0], 2*time.Second, "cool-down jittered in [c/2, 3c/2]")
	assert.LessOrEqual(t, c.waits[0], 6*time.Second)
}

func TestStaysClosedBelowTheRatioAndForgetsOldCalls(t *testing.T) {
	b, c, _ := newBreaker(t)
	for i := range 20 {
		call(t, b, i%3 == 0) // 7 of 20 fail: 35%
	}
	assert.Equal(t, breaker.Closed, b.State())
	// Old calls slide out of the window: with them, 9 more failures would
	// make 16 of 29 and open it; without them, 9 calls are below the minimum.
	c.advance(11 * time.Second)
	for range 9 {
		call(t, b, true)
	}
	assert.Equal(t, breaker.Closed, b.State())
	call(t, b, false)
	assert.Equal(t, breaker.Closed, b.State(), "a success never opens it")
	call(t, b, true)
	assert.Equal(t, breaker.Open, b.State(), "10 failures in 11 calls inside the window")
}

func TestPermanentFailuresNeverOpenIt(t *testing.T) {
	b, _, _ := newBreaker(t)
	for range 100 {
		call(t, b, false) // a 422 is an answer from a healthy downstream
	}
	assert.Equal(t, breaker.Closed, b.State())
}

func TestAcquireBlocksWhileOpenThenProbes(t *testing.T) {
	b, c, changes := newBreaker(t)
	for range 10 {
		call(t, b, true)
	}
	require.Equal(t, breaker.Open, b.State())

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := b.Acquire(ctx, true)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "no call goes through while open")

	got := make(chan breaker.Permit, 3)
	for range 3 {
		go func() {
			p, err := b.Acquire(t.Context(), true)
			if err == nil {
				got <- p
			}
		}()
	}
	c.coolDownOver()
	p1, p2 := <-got, <-got
	assert.True(t, p1.Probe())
	assert.True(t, p2.Probe())
	select {
	case <-got:
		t.Fatal("only two probes go through when half-open")
	case <-time.After(20 * time.Millisecond):
	}
	b.Done(p1, false)
	assert.Equal(t, breaker.HalfOpen, b.State())
	b.Done(p2, false)
	assert.Equal(t, breaker.Closed, b.State(), "closes when every probe succeeded")
	p3 := <-got
	assert.False(t, p3.Probe(), "the third waiter goes through once closed")
	assert.Equal(t, []transition{{breaker.Closed, breaker.Open}, {breaker.Open, breaker.HalfOpen}, {breaker.HalfOpen, breaker.Closed}}, *changes)
}

func TestFailedProbeReopensWithALongerCoolDown(t *testing.T) {
	b, c, _ := newBreaker(t)
	for range 10 {
		call(t, b, true)
	}
	for round := 1; round <= 4; round++ {
		c.coolDownOver()
		require.Equal(t, breaker.HalfOpen, b.State())
		call(t, b, true)
		require.Equal(t, breaker.Open, b.State())
	}
	require.Len(t, c.waits, 5)
	// Mean cool-down doubles per failed round (4s, 8s, 16s) and stops at the max (16s).
	bounds := []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 16 * time.Second}
	for i, w := range c.waits {
		assert.GreaterOrEqual(t, w, bounds[i]/2, "wait %d", i)
		assert.LessOrEqual(t, w, bounds[i]*3/2, "wait %d", i)
	}
}

func validOptions() breaker.Options {
	return breaker.Options{Window: 10 * time.Second, MinCalls: 10, FailureRatio: 0.5, CoolDown: 4 * time.Second,
		MaxCoolDown: 16 * time.Second, Probes: 2}
}

// The breaker has no defaults of its own (they are the binary's, in package
// config): a missing option is refused by name, not filled in.
func TestOptionsValidate(t *testing.T) {
	_, err := breaker.New(validOptions())
	require.NoError(t, err)
	tests := []struct {
		name   string
		mutate func(*breaker.Options)
		want   string
	}{
		{"no window", func(o *breaker.Options) { o.Window = 0 }, "Window"},
		{"no min calls", func(o *breaker.Options) { o.MinCalls = 0 }, "MinCalls"},
		{"negative min calls", func(o *breaker.Options) { o.MinCalls = -1 }, "MinCalls"},
		{"no failure ratio", func(o *breaker.Options) { o.FailureRatio = 0 }, "FailureRatio"},
		{"failure ratio over 1", func(o *breaker.Options) { o.FailureRatio = 1.5 }, "FailureRatio"},
		{"no cool-down", func(o *breaker.Options) { o.CoolDown = 0 }, "CoolDown"},
		{"no max cool-down", func(o *breaker.Options) { o.MaxCoolDown = 0 }, "MaxCoolDown"},
		{"max cool-down below cool-down", func(o *breaker.Options) { o.MaxCoolDown = time.Second }, "MaxCoolDown"},
		{"no probes", func(o *breaker.Options) { o.Probes = 0 }, "Probes"},
		{"negative probes", func(o *breaker.Options) { o.Probes = -1 }, "Probes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.mutate(&o)
			_, err := breaker.New(o)
			require.ErrorIs(t, err, breaker.ErrOption)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func openIt(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	for range 10 {
		call(t, b, true)
	}
	require.Equal(t, breaker.Open, b.State())
}

// A probe that outlives its round (slow, then the round failed on another
// probe) must not consume a place in, nor decide, the next round.
func TestASlowProbeOfAnEarlierRoundDecidesNothing(t *testing.T) {
	tests := []struct {
		name   string
		failed bool
	}{
		{"late success does not close", false},
		{"late failure does not reopen", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c, _ := newBreaker(t)
			openIt(t, b)
			c.coolDownOver()
			slow, err := b.Acquire(t.Context(), true)
			require.NoError(t, err)
			call(t, b, true) // the other probe fails: round 1 is over
			require.Equal(t, breaker.Open, b.State())

			c.coolDownOver() // round 2
			p, err := b.Acquire(t.Context(), true)
			require.NoError(t, err)
			require.True(t, p.Probe())
			b.Done(slow, tt.failed)
			assert.Equal(t, breaker.HalfOpen, b.State(), "the slow probe of round 1 decided nothing")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			q, err := b.Acquire(ctx, true)
			require.NoError(t, err, "round 2 still has its second place")
			assert.True(t, q.Probe())
			b.Done(p, false)
			b.Done(q, false)
			assert.Equal(t, breaker.Closed, b.State(), "round 2 is decided by its own probes")
		})
	}
}

// A probe cut short by a shutdown is not an answer: it frees its place
// without closing or opening anything.
func TestReleasedProbeIsNotASuccess(t *testing.T) {
	b, c, _ := newBreaker(t)
	openIt(t, b)
	c.coolDownOver()
	p1, err := b.Acquire(t.Context(), true)
	require.NoError(t, err)
	p2, err := b.Acquire(t.Context(), true)
	require.NoError(t, err)
	b.Release(p1)
	b.Done(p2, false)
	assert.Equal(t, breaker.HalfOpen, b.State(), "one success of two: not closed")
	p3, err := b.Acquire(t.Context(), true)
	require.NoError(t, err)
	require.True(t, p3.Probe(), "the released place is given again")
	b.Done(p3, false)
	assert.Equal(t, breaker.Closed, b.State())
	b.Release(breaker.Permit{}) // a closed-state permit: nothing to give back
	assert.Equal(t, breaker.Closed, b.State())
}

// TestAWallClockStepDoesNotBlindTheWindow: the window runs on the
// monotonic clock. A step of the wall clock back by 30s or more after half
// a minute of calls left every outcome in a slot "already gone" when the
// window ran on the wall clock: the breaker could not open until the wall
// clock caught up. Whatever the wall clock does, it opens after as many
// fresh failures as without a step.
func TestAWallClockStepDoesNotBlindTheWindow(t *testing.T) {
	failuresToOpen := func(t *testing.T, step time.Duration) int {
		b, c, _ := newBreaker(t)
		// Half a minute of successes fills every slot of the window.
		for range 30 {
			call(t, b, false)
			c.advance(time.Second)
		}
		c.Step(step)
		for i := 1; i <= 100; i++ {
			call(t, b, true)
			c.advance(10 * time.Millisecond)
			if b.State() == breaker.Open {
				return i
			}
		}
		return -1
	}
	want := failuresToOpen(t, 0)
	require.Positive(t, want)
	tests := []struct {
		name string
		step time.Duration
	}{
		{"back 30s", -30 * time.Second},
		{"back a minute", -time.Minute},
		{"back an hour", -time.Hour},
		{"forward an hour", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, want, failuresToOpen(t, tt.step))
		})
	}
}

// With Silent, the breaker opens only while the downstream serves no one:
// failures that fill its window while others are answered (quick refusals
// of an engine serving its load) open it once the silence comes, on the
// next failure, a read's own retry included.
func TestItOpensOnlyOnASilentDownstream(t *testing.T) {
	var silent atomic.Bool
	c := &clock{Fake: fakeclock.NewFake(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))}
	b, err := breaker.New(breaker.Options{
		Window: 10 * time.Second, MinCalls: 10, FailureRatio: 0.5, CoolDown: 4 * time.Second,
		MaxCoolDown: 16 * time.Second, Probes: 2, Rand: retry.NewRand(1), Clock: c, AfterFunc: c.AfterFunc,
		Silent: silent.Load,
	})
	require.NoError(t, err)
	for range 20 {
		call(t, b, true)
	}
	assert.Equal(t, breaker.Closed, b.State(), "20 failures of 20, but the downstream serves others")
	silent.Store(true)
	p, err := b.Acquire(t.Context(), false) // a read that failed before
	require.NoError(t, err)
	b.Done(p, true)
	assert.Equal(t, breaker.Open, b.State(), "silent now: the window's fresh failures open it")
}
