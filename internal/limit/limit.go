package limit

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// Signal is what one call says about the downstream's load.
type Signal int

const (
	// Answered: the downstream answered in its own time (a 2xx, or a
	// permanent failure such as a 422): its latency is a sample.
	Answered Signal = iota
	// Overloaded: the downstream shed the call (503, 429), timed out, or
	// could not be reached: the limit goes down.
	Overloaded
	// Ignored: no answer about the downstream's load (another failure, or
	// a call cut short by a stop): the slot is given back, nothing learnt.
	Ignored
)

// Options configures a Limiter. Max is required.
type Options struct {
	Min, Max int // bounds of the limit (Min default 1)
	Initial  int // the limit to start from (default Min): start low, find the capacity
	// Tolerance is how far the smoothed latency may rise above the
	// baseline (the least latency seen over BaselineWindow) before it is a
	// sign of overload (default 1.5). A rise is a sign only when it is also
	// at least MinRise (default 2ms: the jitter of a fast engine on a loaded
	// client is not a queue).
	Tolerance float64
	MinRise   time.Duration
	// Backoff multiplies the limit when the latency rises (default 0.9);
	// ShedBackoff when the downstream sheds or times out (default 0.5): a
	// shed means the engine's queue is full, and a fleet that halves
	// together lets it empty, so that every replica sees (and learns) the
	// engine's unloaded latency again. Each at most once per round trip.
	Backoff, ShedBackoff float64
	// BaselineWindow is how long a latency counts as the baseline (default
	// 10s). Short enough that replicas which joined a loaded engine, and saw
	// only its queued latency, all learn the unloaded one again at the next
	// dip (a halving after a shed empties the queue), so they steer by the
	// same reference and share the engine fairly; long enough to span many
	// round trips.
	BaselineWindow time.Duration
	// Rand jitters the pauses Retry-After asks for (default: seeded from
	// the clock); Now is the clock (default time.Now).
	Rand retry.Source
	Now  func() time.Time
}

func (o *Options) defaults() error {
	if o.Min <= 0 {
		o.Min = 1
	}
	if o.Initial <= 0 {
		o.Initial = o.Min
	}
	if o.Tolerance == 0 {
		o.Tolerance = 1.5
	}
	if o.MinRise == 0 {
		o.MinRise = 2 * time.Millisecond
	}
	if o.Backoff == 0 {
		o.Backoff = 0.9
	}
	if o.ShedBackoff == 0 {
		o.ShedBackoff = 0.5
	}
	if o.BaselineWindow <= 0 {
		o.BaselineWindow = 10 * time.Second
	}
	switch {
	case o.Max < o.Min:
		return fmt.Errorf("limit: max (%d) must be >= min (%d)", o.Max, o.Min)
	case o.Initial < o.Min || o.Initial > o.Max:
		return fmt.Errorf("limit: initial (%d) must be within [%d, %d]", o.Initial, o.Min, o.Max)
	case o.Tolerance <= 1:
		return fmt.Errorf("limit: tolerance (%v) must be > 1", o.Tolerance)
	case o.Backoff <= 0 || o.Backoff >= 1 || o.ShedBackoff <= 0 || o.ShedBackoff >= 1:
		return fmt.Errorf("limit: backoff (%v) and shed backoff (%v) must be in (0, 1)", o.Backoff, o.ShedBackoff)
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(time.Now().UnixNano()))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Limiter is an adaptive limit on the calls in flight to one downstream,
// for one replica. See the package documentation for the algorithm.
type Limiter struct {
	o Options

	mu         sync.Mutex
	limit      float64
	threshold  float64 // the slow-start threshold: above it, additive growth
	inFlight   int
	srtt       time.Duration // smoothed latency of answered calls; 0 until the first
	full       time.Time     // when the calls in flight last reached the limit
	baseline   windowMin
	decreased  time.Time // when the limit last went down
	shed       time.Time // when a call was last shed or timed out
	pauseUntil time.Time
	waiters    list.List   // of *waiter, first come first served
	resume     *time.Timer // grants when a pause is over
	onChange   func(limit int)
}

// waiter is an Acquire waiting for a slot; ch is closed when granted.
type waiter struct {
	ch      chan struct{}
	granted bool
}

// Token is a slot taken by Acquire; give it back to Release.
type Token struct{ start time.Time }

// New builds a Limiter.
func New(o Options) (*Limiter, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Limiter{o: o, limit: float64(o.Initial), threshold: float64(o.Max),
		baseline: windowMin{window: o.BaselineWindow}}, nil
}

// OnChange sets a function called with the new limit after each change,
// outside the lock (for a gauge).
func (l *Limiter) OnChange(f func(limit int)) {
	l.mu.Lock()
	l.onChange = f
	l.mu.Unlock()
}

// Limit is the current limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// LastShed is when a call was last shed or timed out (an Overloaded
// signal; zero: never). A risen latency does not count: the limit rises
// into it on purpose, at the engine's capacity, to find it.
func (l *Limiter) LastShed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shed
}

// Waiting is how many calls wait for a slot.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiters.Len()
}

// Paused reports until when the downstream asked the replica to wait (zero
// when it did not, or the time is past).
func (l *Limiter) Paused() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.o.Now().Before(l.pauseUntil) {
		return l.pauseUntil
	}
	return time.Time{}
}

// Acquire waits for a slot: fewer calls in flight than the limit, and no
// pause the downstream asked for. Slots go to waiters in the order they
// came. It returns ctx's error if ctx ends first.
func (l *Limiter) Acquire(ctx context.Context) (Token, error) {
	l.mu.Lock()
	if l.waiters.Len() == 0 && l.free(l.o.Now()) {
		l.take(l.o.Now())
		l.mu.Unlock()
		return Token{start: l.o.Now()}, nil
	}
	w := &waiter{ch: make(chan struct{})}
	e := l.waiters.PushBack(w)
	l.schedule()
	l.mu.Unlock()
	select {
	case <-w.ch:
		return Token{start: l.o.Now()}, nil
	case <-ctx.Done():
		l.mu.Lock()
		if w.granted {
			l.inFlight-- // granted as ctx ended: give it to the next
			l.grant()
		} else {
			l.waiters.Remove(e)
		}
		l.mu.Unlock()
		return Token{}, ctx.Err()
	}
}

// free reports whether a call may start now. Locked.
func (l *Limiter) free(now time.Time) bool {
	return !now.Before(l.pauseUntil) && l.inFlight < int(l.limit)
}

// take counts a call in flight. Locked.
func (l *Limiter) take(now time.Time) {
	l.inFlight++
	if l.inFlight >= int(l.limit) {
		l.full = now
	}
}

// grant gives free slots to the first waiters. Locked.
func (l *Limiter) grant() {
	now := l.o.Now()
	for l.waiters.Len() > 0 && l.free(now) {
		w := l.waiters.Remove(l.waiters.Front()).(*waiter)
		w.granted = true
		l.take(now)
		close(w.ch)
	}
	l.schedule()
}

// schedule makes sure waiters held by a pause are granted when it is over.
// Locked.
func (l *Limiter) schedule() {
	wait := l.pauseUntil.Sub(l.o.Now())
	if l.waiters.Len() == 0 || wait <= 0 || l.resume != nil {
		return
	}
	l.resume = time.AfterFunc(wait, func() {
		l.mu.Lock()
		l.resume = nil
		l.grant()
		l.mu.Unlock()
	})
}

// Release gives back t's slot with what the call said: the signal, and a
// wait the downstream asked for (Retry-After on a 503 or a 429), which
// pauses every call of this replica for that long, jittered up to half as
// much again, so that a fleet told to wait does not come back together.
func (l *Limiter) Release(t Token, s Signal, retryAfter time.Duration) {
	l.mu.Lock()
	now := l.o.Now()
	l.inFlight--
	before := int(l.limit)
	rtt := now.Sub(t.start)
	switch s {
	case Answered:
		l.answered(now, rtt)
	case Overloaded:
		l.shed = now
		l.decrease(now, l.o.ShedBackoff)
	}
	if retryAfter > 0 && s == Overloaded {
		pause := now.Add(retryAfter + time.Duration(l.o.Rand.Int64N(int64(retryAfter/2)+1)))
		if pause.After(l.pauseUntil) {
			l.pauseUntil = pause
			if l.resume != nil {
				l.resume.Stop()
				l.resume = nil
			}
		}
	}
	l.grant()
	after := int(l.limit)
	f := l.onChange
	l.mu.Unlock()
	if f != nil && after != before {
		f(after)
	}
}

// answered learns from a latency sample. Locked.
func (l *Limiter) answered(now time.Time, rtt time.Duration) {
	l.baseline.add(now, rtt)
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 8
	}
	if base := l.baseline.min(now); base > 0 && l.queued(base) {
		l.decrease(now, l.o.Backoff)
		return
	}
	// Grow only a limit in use (reached within the last two round trips):
	// a limit that idle periods grew would let a burst through at once.
	if now.Sub(l.full) > 2*max(l.srtt, time.Millisecond) {
		return
	}
	if l.limit < l.threshold {
		l.limit++ // slow start: doubles each round trip
	} else {
		l.limit += 1 / math.Floor(l.limit) // one more each round trip
	}
	l.limit = math.Min(l.limit, float64(l.o.Max))
}

// queued reports a latency risen above base enough to mean calls wait in
// the downstream's queue. Locked.
func (l *Limiter) queued(base time.Duration) bool {
	return float64(l.srtt) > l.o.Tolerance*float64(base) && l.srtt-base >= l.o.MinRise
}

// decrease lowers the limit on a sign of overload, once per smoothed
// latency: the calls of one round trip all tell of the same overload.
// Locked.
func (l *Limiter) decrease(now time.Time, by float64) {
	if !l.decreased.IsZero() && now.Sub(l.decreased) < max(l.srtt, time.Millisecond) {
		return
	}
	l.decreased = now
	l.limit = math.Max(float64(l.o.Min), l.limit*by)
	l.threshold = l.limit
}

// windowMin is the least latency seen over a window, kept in ten slots.
type windowMin struct {
	window time.Duration
	slots  [10]struct {
		epoch int64
		min   time.Duration
	}
}

func (w *windowMin) width() int64 { return max(int64(w.window/10), 1) }

func (w *windowMin) add(now time.Time, d time.Duration) {
	e := now.UnixNano() / w.width()
	s := &w.slots[e%10]
	if s.epoch != e {
		s.epoch, s.min = e, d
		return
	}
	s.min = min(s.min, d)
}

func (w *windowMin) min(now time.Time) time.Duration {
	e := now.UnixNano() / w.width()
	var m time.Duration
	for _, s := range w.slots {
		if e-s.epoch < 10 && s.min > 0 && (m == 0 || s.min < m) {
			m = s.min
		}
	}
	return m
}
