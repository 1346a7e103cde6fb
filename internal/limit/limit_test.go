package limit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
)

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newLimiter(t *testing.T, o limit.Options) (*limit.Limiter, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
	o.Now, o.Rand = c.Now, retry.NewRand(1)
	if o.Max == 0 {
		o.Max = 64
	}
	l, err := limit.New(o)
	require.NoError(t, err)
	return l, c
}

// round makes limit calls at once, each answered after rtt with s.
func round(t *testing.T, l *limit.Limiter, c *clock, rtt time.Duration, s limit.Signal) {
	t.Helper()
	n := l.Limit()
	tokens := make([]limit.Token, n)
	for i := range tokens {
		var err error
		tokens[i], err = l.Acquire(t.Context())
		require.NoError(t, err)
	}
	c.advance(rtt)
	for _, tk := range tokens {
		l.Release(tk, s, 0)
	}
}

func TestSlowStartDoublesEachRoundTrip(t *testing.T) {
	l, c := newLimiter(t, limit.Options{})
	var got []int
	for range 6 {
		got = append(got, l.Limit())
		round(t, l, c, 10*time.Millisecond, limit.Answered)
	}
	assert.Equal(t, []int{1, 2, 4, 8, 16, 32}, got)
}

func TestOverloadMultipliesTheLimitOncePerRoundTrip(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 40})
	round(t, l, c, 10*time.Millisecond, limit.Answered) // a latency to pace decreases by
	before := l.Limit()
	round(t, l, c, 10*time.Millisecond, limit.Overloaded) // every call of the round says so
	assert.Equal(t, int(float64(before)*0.5), l.Limit(), "one decrease for one round trip of sheds")

	// Past the slow-start threshold the limit grows by one a round trip.
	after := l.Limit()
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	assert.Equal(t, after+1, l.Limit())
}

// A latency risen above the tolerance of the baseline is a sign of
// overload before anything is shed: the engine's queue is growing.
func TestARisingLatencyLowersTheLimit(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 10, Max: 10})
	for range 5 {
		round(t, l, c, 10*time.Millisecond, limit.Answered)
	}
	require.Equal(t, 10, l.Limit())
	for range 20 {
		round(t, l, c, 40*time.Millisecond, limit.Answered) // four times the baseline
	}
	assert.Less(t, l.Limit(), 10)
	assert.Positive(t, l.Limit())

	// The engine recovers: the limit grows back.
	low := l.Limit()
	for range 30 {
		round(t, l, c, 10*time.Millisecond, limit.Answered)
	}
	assert.Greater(t, l.Limit(), low)
}

func TestTheLimitStaysWithinItsBounds(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Min: 2, Max: 5})
	for range 20 {
		round(t, l, c, time.Millisecond, limit.Answered)
	}
	assert.Equal(t, 5, l.Limit())
	for range 40 {
		round(t, l, c, time.Millisecond, limit.Overloaded)
	}
	assert.Equal(t, 2, l.Limit())
}

// An unused limit does not grow: idle time must not let a burst through.
func TestAnIdleLimitDoesNotGrow(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 8})
	for range 50 {
		tk, err := l.Acquire(t.Context())
		require.NoError(t, err)
		c.advance(time.Millisecond)
		l.Release(tk, limit.Answered, 0) // one call at a time
	}
	assert.Equal(t, 8, l.Limit())
}

// Acquire waits for a slot and is woken by a release.
func TestAcquireWaitsForASlot(t *testing.T) {
	l, _ := newLimiter(t, limit.Options{Initial: 1})
	first, err := l.Acquire(t.Context())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = l.Acquire(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "no slot while the one call is in flight")

	got := make(chan error, 1)
	go func() { _, err := l.Acquire(t.Context()); got <- err }()
	l.Release(first, limit.Ignored, 0)
	require.NoError(t, <-got)
}

// Slots go to the calls that waited longest.
func TestSlotsAreGivenInTheOrderAsked(t *testing.T) {
	l, _ := newLimiter(t, limit.Options{Initial: 1})
	first, err := l.Acquire(t.Context())
	require.NoError(t, err)
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			tk, err := l.Acquire(t.Context())
			if err == nil {
				order <- i
				l.Release(tk, limit.Ignored, 0)
			}
		}()
		require.Eventually(t, func() bool { return l.Waiting() == i+1 }, 5*time.Second, time.Millisecond)
	}
	l.Release(first, limit.Ignored, 0)
	assert.Equal(t, []int{0, 1, 2}, []int{<-order, <-order, <-order})
}

// A Retry-After pauses every call of the replica, for the time asked plus
// a jitter of up to half of it, the same for a seed.
func TestRetryAfterPausesTheReplica(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 4})
	tk, err := l.Acquire(t.Context())
	require.NoError(t, err)
	l.Release(tk, limit.Overloaded, 2*time.Second)
	until := l.Paused()
	require.False(t, until.IsZero())
	wait := until.Sub(c.Now())
	assert.GreaterOrEqual(t, wait, 2*time.Second)
	assert.LessOrEqual(t, wait, 3*time.Second)
	want := 2*time.Second + time.Duration(retry.NewRand(1).Int64N(int64(time.Second)+1))
	assert.Equal(t, want, wait, "the jitter is the seeded source's draw")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = l.Acquire(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "paused: no call goes through")
	c.advance(wait)
	_, err = l.Acquire(t.Context())
	assert.NoError(t, err)
	assert.True(t, l.Paused().IsZero())
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []limit.Options{
		{Max: 0}, {Min: 4, Max: 2}, {Max: 4, Initial: 9}, {Max: 4, Tolerance: 0.5}, {Max: 4, Backoff: 1.5},
	} {
		_, err := limit.New(o)
		assert.Error(t, err, "%+v", o)
	}
}

// Independent limiters sharing one bottleneck converge on fair shares:
// four replicas, starting one after the other, in front of an engine whose
// queue makes calls slower as it fills and that sheds past it.
func TestReplicasConvergeOnAFairShare(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
	const servers = 24 // calls the engine serves at once, at its unloaded latency
	var ls []*limit.Limiter
	for i := range 4 {
		l, err := limit.New(limit.Options{Max: 64, BaselineWindow: 2 * time.Second, Now: c.Now, Rand: retry.NewRand(uint64(i))})
		require.NoError(t, err)
		ls = append(ls, l)
	}
	for r := range 600 {
		running := ls[:min(len(ls), 1+r/100)] // a replica joins every 100 rounds
		total := 0
		for _, l := range running {
			total += l.Limit()
		}
		rtt := 10 * time.Millisecond
		if total > servers {
			rtt = rtt * time.Duration(total) / servers // the queue's wait
		}
		var tokens [][]limit.Token
		for _, l := range running {
			var ts []limit.Token
			for range l.Limit() {
				tk, err := l.Acquire(t.Context())
				require.NoError(t, err)
				ts = append(ts, tk)
			}
			tokens = append(tokens, ts)
		}
		c.advance(rtt)
		for i, l := range running {
			sig := limit.Answered
			if total > 2*servers {
				sig = limit.Overloaded // past the queue: shed
			}
			for _, tk := range tokens[i] {
				l.Release(tk, sig, 0)
			}
		}
	}
	total, lo, hi := 0, 1<<30, 0
	for _, l := range ls {
		total += l.Limit()
		lo, hi = min(lo, l.Limit()), max(hi, l.Limit())
	}
	t.Logf("limits after 600 rounds: %v", limits(ls))
	assert.LessOrEqual(t, total, servers*3/2, "the fleet keeps the engine's queue short")
	assert.GreaterOrEqual(t, total, servers*3/4, "and its servers busy")
	assert.LessOrEqual(t, hi-lo, 3, "fair shares, the first replica's head start given up")
}

func limits(ls []*limit.Limiter) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.Limit())
	}
	return out
}
