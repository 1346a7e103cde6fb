package limit_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/limit"
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
	o.Now = c.Now
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
		tokens[i], err = l.Acquire(t.Context(), false)
		require.NoError(t, err)
	}
	c.advance(rtt)
	for _, tk := range tokens {
		l.Release(tk, s)
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
}

// Past a shed, the limit follows the cubic of the time since the decrease
// (RFC 9438's window, in calls): W(t) = 0.4(t-K)^3 + 40, from the 40 it
// fell from, back there after K = cbrt(40 x 0.5 / 0.4) = 3.68s, flat around
// it, then faster. Rounds of 10ms track it within a call.
func TestPastAShedTheLimitFollowsTheCubic(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 20})
	round(t, l, c, 10*time.Millisecond, limit.Answered) // slow start: 20 to 40
	require.Equal(t, 40, l.Limit())
	round(t, l, c, 10*time.Millisecond, limit.Overloaded)
	require.Equal(t, 20, l.Limit())
	w := func(t float64) float64 { return 0.4*(t-3.684)*(t-3.684)*(t-3.684) + 40 }
	start := c.Now()
	at := map[float64]int{}
	for step := 1; step <= 570; step++ { // 5.7s
		round(t, l, c, 10*time.Millisecond, limit.Answered)
		if step%100 == 0 || step == 570 {
			at[c.Now().Sub(start).Seconds()] = l.Limit()
		}
	}
	for s, got := range at {
		assert.InDelta(t, w(s), float64(got), 1.01, "at %.2fs past the decrease", s)
	}
	assert.Equal(t, map[float64]int{1: 32, 2: 38, 3: 39, 4: 40, 5: 40, 5.7: 43}, at,
		"back at the 40 it fell from after K, flat around it, then faster")
}

// Past a queue, the limit grows by one each round trip when the round trip
// is longer than Growth (200ms), or each Growth when it is shorter.
func TestPastAQueueTheLimitGrowsByOneEachRoundTripOrGrowth(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 40})
	round(t, l, c, 300*time.Millisecond, limit.Answered)
	round(t, l, c, 300*time.Millisecond, limit.Queued)
	after := l.Limit()
	for i := range 3 {
		round(t, l, c, 300*time.Millisecond, limit.Answered)
		assert.Equal(t, after+1+i, l.Limit())
	}

	l, c = newLimiter(t, limit.Options{Initial: 40})
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	round(t, l, c, 10*time.Millisecond, limit.Queued)
	after = l.Limit()
	for range 19 {
		round(t, l, c, 10*time.Millisecond, limit.Answered)
	}
	assert.Equal(t, after, l.Limit(), "19 round trips of 10ms are under 200ms")
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	assert.Equal(t, after+1, l.Limit())
}

// A queue the engine's view sees lowers the limit by a tenth, once a round
// trip; the limit grows back when the queue is gone.
func TestAQueueLowersTheLimit(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 10, Max: 10})
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	require.Equal(t, 10, l.Limit())
	round(t, l, c, 10*time.Millisecond, limit.Queued)
	assert.Equal(t, 9, l.Limit(), "one decrease for one round trip")
	for range 10 {
		round(t, l, c, 10*time.Millisecond, limit.Queued)
	}
	low := l.Limit()
	assert.Less(t, low, 5)
	assert.Positive(t, low)
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
		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		c.advance(time.Millisecond)
		l.Release(tk, limit.Answered) // one call at a time
	}
	assert.Equal(t, 8, l.Limit())
}

// Acquire waits for a slot and is woken by a release.
func TestAcquireWaitsForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the timed-out Acquire waits in the bubble, not 20ms of wall clock
		l, _ := newLimiter(t, limit.Options{Initial: 1})
		first, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(ctx, false)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "no slot while the one call is in flight")

		got := make(chan error, 1)
		go func() { _, err := l.Acquire(t.Context(), false); got <- err }()
		l.Release(first, limit.Ignored)
		require.NoError(t, <-got)
	})
}

// Slots go to the calls that waited longest.
func TestSlotsAreGivenInTheOrderAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // each waiter is queued before the next is started
		l, _ := newLimiter(t, limit.Options{Initial: 1})
		first, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		order := make(chan int, 3)
		for i := range 3 {
			go func() {
				tk, err := l.Acquire(t.Context(), false)
				if err == nil {
					order <- i
					l.Release(tk, limit.Ignored)
				}
			}()
			synctest.Wait() // the waiter is blocked in Acquire
			require.Equal(t, i+1, l.Waiting())
		}
		l.Release(first, limit.Ignored)
		assert.Equal(t, []int{0, 1, 2}, []int{<-order, <-order, <-order})
	})
}

// A retry (a read that failed before) is granted a slot before any first
// attempt, however long the first attempts waited.
func TestRetriesAreGrantedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // each waiter is queued before the next is started
		l, _ := newLimiter(t, limit.Options{Initial: 1})
		first, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		order := make(chan string, 3)
		for i, retry := range []bool{false, false, true} {
			go func() {
				tk, err := l.Acquire(t.Context(), retry)
				if err == nil {
					order <- map[bool]string{false: "first", true: "retry"}[retry]
					l.Release(tk, limit.Ignored)
				}
			}()
			synctest.Wait() // the waiter is blocked in Acquire
			require.Equal(t, i+1, l.Waiting())
		}
		l.Release(first, limit.Ignored)
		assert.Equal(t, []string{"retry", "first", "first"}, []string{<-order, <-order, <-order})
	})
}

// Pause holds every new call until the time given; an earlier end does not
// shorten a pause.
func TestPauseHoldsTheReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the timed-out Acquire waits in the bubble, not 20ms of wall clock
		l, c := newLimiter(t, limit.Options{Initial: 4})
		l.Pause(2 * time.Second)
		l.Pause(time.Second)
		assert.Equal(t, c.Now().Add(2*time.Second), l.Paused())

		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := l.Acquire(ctx, true)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "paused: no call goes through, not even a retry")
		c.advance(2 * time.Second)
		_, err = l.Acquire(t.Context(), false)
		assert.NoError(t, err)
		assert.True(t, l.Paused().IsZero())
	})
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []limit.Options{
		{Max: 0}, {Min: 4, Max: 2}, {Max: 4, Initial: 9}, {Max: 4, Backoff: 1.5},
	} {
		_, err := limit.New(o)
		assert.Error(t, err, "%+v", o)
	}
}

// A dip holds the calls in flight at half the limit from its start to its
// end; the slots granted meanwhile are Low, and the calls waiting for one
// go through when it ends.
func TestADipHoldsHalfTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the timed-out Acquire waits in the bubble, not 20ms of wall clock
		l, c := newLimiter(t, limit.Options{Initial: 8})
		l.Dip(time.Second, time.Second)
		before := acquire(t, l, 8) // the replica at its limit
		assert.False(t, before[0].Low(), "before the dip")
		release(l, before)

		c.advance(time.Second)
		var held []limit.Token
		for range 4 {
			tk, err := l.Acquire(t.Context(), false)
			require.NoError(t, err)
			assert.True(t, tk.Low(), "granted during the dip")
			held = append(held, tk)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := l.Acquire(ctx, false)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "half of 8 in flight: the fifth waits")
		assert.Equal(t, 8, l.Limit(), "the limit itself is not lowered")

		c.advance(time.Second)
		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		assert.False(t, tk.Low(), "the dip is over")
		for _, h := range append(held, tk) {
			l.Release(h, limit.Ignored)
		}
	})
}

// A dip halves what the replica sent since the last dip where that is less
// than its limit (fewer reads to call, no CPU to call them faster): half
// the limit would be no dip at all.
func TestADipHalvesWhatTheReplicaSends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the fifth Acquire's wait is the bubble's, not the wall clock's
		l, _ := newLimiter(t, limit.Options{Initial: 16})
		release(l, acquire(t, l, 8)) // 8 in flight at most, at a limit of 16
		l.Dip(0, time.Second)
		held := acquire(t, l, 4)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := l.Acquire(ctx, false)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "half of the 8 it sent: the fifth waits")
		release(l, held)
	})
}

func acquire(t *testing.T, l *limit.Limiter, n int) []limit.Token {
	t.Helper()
	var tokens []limit.Token
	for range n {
		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		tokens = append(tokens, tk)
	}
	return tokens
}

func release(l *limit.Limiter, tokens []limit.Token) {
	for _, tk := range tokens {
		l.Release(tk, limit.Ignored)
	}
}

// A dip the trial no longer needs ends at once: the calls it held wait no
// longer, and a dip asked for later is not held either.
func TestEndDipEndsTheDipUnderWayOrPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the waits are the bubble's, not the wall clock's
		l, c := newLimiter(t, limit.Options{Initial: 8})
		l.Dip(0, time.Second)
		held := acquire(t, l, 4)
		granted := make(chan limit.Token)
		go func() {
			tk, err := l.Acquire(t.Context(), false)
			assert.NoError(t, err)
			granted <- tk
		}()
		synctest.Wait()
		select {
		case <-granted:
			t.Fatal("half of 8 in flight: the fifth waits in the dip")
		default:
		}
		l.EndDip()
		var tk limit.Token
		select {
		case tk = <-granted:
		case <-time.After(time.Millisecond): // the bubble's clock: at once, once every goroutine waits
			t.Fatal("the dip ended: the fifth is granted")
		}
		assert.False(t, tk.Low(), "granted after the dip ended")
		release(l, append(held, tk))

		l.Dip(time.Second, time.Second) // pending
		l.EndDip()
		c.advance(time.Second)
		all := acquire(t, l, 8)
		for _, tk := range all {
			assert.False(t, tk.Low(), "the pending dip was cancelled")
		}
		release(l, all)
	})
}

// A dip holds one call at least.
func TestADipKeepsOneCall(t *testing.T) {
	l, _ := newLimiter(t, limit.Options{Min: 1, Initial: 1})
	l.Dip(0, time.Second)
	tk, err := l.Acquire(t.Context(), false)
	require.NoError(t, err)
	assert.True(t, tk.Low())
}

// A dip is an experiment, not the limit: it halves a limit at its Min too,
// so that a replica whose limit cannot come down still sends less in it.
func TestADipGoesBelowMin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the timed-out Acquire waits in the bubble, not 20ms of wall clock
		l, _ := newLimiter(t, limit.Options{Min: 8, Initial: 8})
		l.Dip(0, time.Second)
		for range 4 {
			_, err := l.Acquire(t.Context(), false)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := l.Acquire(ctx, false)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "half of 8, though Min is 8")
	})
}

// Restore sets the limit back to its mark, never lower than it is, and
// lets it grow by slow start again.
func TestRestoreSetsTheLimitBackToItsMark(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 16, Max: 32})
	l.Mark()
	round(t, l, c, 10*time.Millisecond, limit.Overloaded)
	require.Equal(t, 8, l.Limit())
	l.Restore()
	assert.Equal(t, 16, l.Limit())
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	assert.Equal(t, 32, l.Limit(), "slow start again: doubled in a round trip")
	l.Mark()
	l.Restore()
	assert.Equal(t, 32, l.Limit(), "a mark below the limit lowers nothing")
}

// A limit that fell on an outage, not on the engine's capacity, grows by
// slow start again once told so: doubling each round trip from where it
// is, where it would have grown by one each Growth.
func TestSlowStartAfterAnOutage(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 16, Max: 32})
	for range 4 {
		round(t, l, c, 10*time.Millisecond, limit.Overloaded)
	}
	require.Equal(t, 1, l.Limit())
	round(t, l, c, 10*time.Millisecond, limit.Answered)
	require.Equal(t, 1, l.Limit(), "past the slow-start threshold: one more each 200ms")
	l.SlowStart()
	var got []int
	for range 5 {
		round(t, l, c, 10*time.Millisecond, limit.Answered)
		got = append(got, l.Limit())
	}
	assert.Equal(t, []int{2, 4, 8, 16, 32}, got)
}

// A call shed while the fleet's load overloads the engine (Paced) keeps its
// slot until a round trip from its start, as a served call would have: a
// shed answered at once does not free its slot for the next call at once.
// Overloaded alone frees it at once.
func TestAPacedShedKeepsItsSlotForARoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limit.New(limit.Options{Min: 4, Max: 4, Initial: 4}) // Min: no decrease frees a slot
		require.NoError(t, err)
		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
		l.Release(tk, limit.Answered) // a round trip of 10ms

		var tokens []limit.Token
		for range 4 {
			tk, err := l.Acquire(t.Context(), false)
			require.NoError(t, err)
			tokens = append(tokens, tk)
		}
		time.Sleep(time.Millisecond)
		l.Release(tokens[0], limit.Paced) // shed after 1ms
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Millisecond)
		_, err = l.Acquire(ctx, false)
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the slot is kept for the rest of the round trip")
		time.Sleep(time.Millisecond) // 10ms from the call's start
		synctest.Wait()
		_, err = l.Acquire(t.Context(), false)
		require.NoError(t, err, "then it is free")

		l.Release(tokens[1], limit.Overloaded)
		ctx, cancel = context.WithTimeout(t.Context(), time.Millisecond)
		_, err = l.Acquire(ctx, false)
		cancel()
		assert.NoError(t, err, "a shed not paced frees its slot at once")
	})
}

// Until the engine has answered one call in its own time, a refused call
// keeps its slot a while, 1ms after the first refusal, doubling with each
// refusal in a row up to 10ms: an engine that refuses everything from the
// start is not called again the moment it refuses. Once one call is
// answered, a refusal frees its slot at once again.
func TestRefusalsBeforeTheFirstAnswerKeepTheirSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limit.New(limit.Options{Max: 1}) // one slot
		require.NoError(t, err)
		kept := func(s limit.Signal) time.Duration {
			tk, err := l.Acquire(t.Context(), false)
			require.NoError(t, err)
			l.Release(tk, s)
			start := time.Now()
			tk, err = l.Acquire(t.Context(), false)
			require.NoError(t, err)
			d := time.Since(start)
			l.Release(tk, limit.Ignored) // says nothing: frees the slot at once
			return d
		}
		var got []time.Duration
		for _, s := range []limit.Signal{limit.Refused, limit.Overloaded, limit.Refused, limit.Refused, limit.Refused, limit.Refused} {
			got = append(got, kept(s))
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms}, got)

		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		l.Release(tk, limit.Answered)
		assert.Zero(t, kept(limit.Refused), "answered once, a refusal frees its slot at once")
		assert.Zero(t, kept(limit.Overloaded))

		// Answered while the latency rises (Held) is answered too.
		l, err = limit.New(limit.Options{Max: 1})
		require.NoError(t, err)
		tk, err = l.Acquire(t.Context(), false)
		require.NoError(t, err)
		l.Release(tk, limit.Held)
		assert.Zero(t, kept(limit.Refused))
	})
}

// BenchmarkAcquireRelease is one call's way through a limit that has a slot
// free, on the real clock: what every read delivered pays.
func BenchmarkAcquireRelease(b *testing.B) {
	l, err := limit.New(limit.Options{Max: 32})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tok, err := l.Acquire(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(tok, limit.Answered)
	}
}

// A dip's calls say nothing of the room at the full limit: answered, they
// do not grow it. A fleet whose limits grew in its dips came back from
// each over the engine's room, all at once.
func TestADipsCallsDoNotGrowTheLimit(t *testing.T) {
	l, c := newLimiter(t, limit.Options{Initial: 1})
	call := func() {
		tk, err := l.Acquire(t.Context(), false)
		require.NoError(t, err)
		c.advance(10 * time.Millisecond)
		l.Release(tk, limit.Answered)
	}
	l.Dip(0, time.Second)
	for range 4 {
		call()
	}
	assert.Equal(t, 1, l.Limit(), "grown in the dip")
	c.advance(time.Second)
	call()
	assert.Equal(t, 2, l.Limit(), "not grown after it")
}
