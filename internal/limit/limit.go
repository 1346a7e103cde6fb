package limit

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Signal is what one call says about the downstream's load, as the
// engine's view (package engine) judged it.
type Signal int

const (
	// Answered: the downstream answered in its own time: the limit may grow.
	Answered Signal = iota
	// Queued: the engine's latency shows a queue: the limit comes down by
	// Backoff.
	Queued
	// Overloaded: the call was shed while the engine is overloaded: the
	// limit comes down by ShedBackoff.
	Overloaded
	// Ignored: no answer about the downstream's load (a read's own failure,
	// a shed of an engine not overloaded, a call cut short by a stop): the
	// slot is given back, nothing learnt.
	Ignored
	// Paced: as Overloaded, and the slot is kept until a round trip (the
	// smoothed latency) from the call's start, as a served call would have
	// kept it: a shed answered at once frees its slot at once, and a
	// replica over an engine's capacity sent a call a millisecond in each
	// slot over it, each shed. For an engine that the fleet's own load
	// overloads (the engine's view found it so).
	Paced
	// Refused: a shed or another transient failure the engine's view has
	// not found to be load: as Ignored, nothing learnt of the engine's
	// load, unless the engine has answered none of the replica's calls
	// yet; then the slot is kept a while (see Limiter.Release).
	Refused
	// Held: answered in its own time while the engine's latency rises:
	// the limit neither grows nor falls on it, but the engine answered.
	Held
)

// Options configures a Limiter. Max is required.
type Options struct {
	Min, Max int // bounds of the limit (Min default 1)
	Initial  int // the limit to start from (default Min): start low, find the capacity
	// Backoff multiplies the limit on a queue (default 0.9); ShedBackoff on
	// a shed of an overloaded engine (default 0.5): a fleet that halves
	// together lets the engine's queue empty. Each at most once per round
	// trip.
	Backoff, ShedBackoff float64
	// Growth is the least time the limit takes to grow by one past a
	// queue (default 200ms): one more each round trip, or each Growth if
	// the round trip is shorter. Against an engine that answers in a few
	// milliseconds, one per round trip is a fleet of R replicas adding R
	// calls every few milliseconds. Past a shed the limit follows the
	// cubic instead (see the package documentation).
	Growth time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Min <= 0 {
		o.Min = 1
	}
	if o.Initial <= 0 {
		o.Initial = o.Min
	}
	if o.Backoff == 0 {
		o.Backoff = 0.9
	}
	if o.ShedBackoff == 0 {
		o.ShedBackoff = 0.5
	}
	if o.Growth == 0 {
		o.Growth = 200 * time.Millisecond
	}
	switch {
	case o.Max < o.Min:
		return fmt.Errorf("limit: max (%d) must be >= min (%d)", o.Max, o.Min)
	case o.Initial < o.Min || o.Initial > o.Max:
		return fmt.Errorf("limit: initial (%d) must be within [%d, %d]", o.Initial, o.Min, o.Max)
	case o.Backoff <= 0 || o.Backoff >= 1 || o.ShedBackoff <= 0 || o.ShedBackoff >= 1:
		return fmt.Errorf("limit: backoff (%v) and shed backoff (%v) must be in (0, 1)", o.Backoff, o.ShedBackoff)
	case o.Growth < 0:
		return fmt.Errorf("limit: growth (%s) must be >= 0", o.Growth)
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
	credit     float64 // answered calls towards the next additive step
	inFlight   int
	srtt       time.Duration // smoothed latency of answered calls, to pace decreases; 0 until the first
	full       time.Time     // when the calls in flight last reached the limit
	decreased  time.Time     // when the limit last went down
	pauseUntil time.Time
	// A dip holds the calls in flight at half the limit from dipFrom to
	// dipUntil, or at half the most calls in flight since the last dip
	// (peak) if fewer: held, once the dip begins (0 before).
	dipFrom, dipUntil time.Time
	peak, held        int
	mark              float64 // the limit when last marked (Mark)
	// wMax is the limit the last decrease on a shed came down from: past
	// slow start, the limit grows by the cubic of the time since (0: by
	// Growth, after a queue).
	wMax float64
	// served: the engine has answered a call in its own time (Answered,
	// Queued, Held); until then, refusals is how many calls it refused.
	served   bool
	refusals int
	retries  list.List   // of *waiter: retries wait ahead of first attempts
	firsts   list.List   // of *waiter, first come first served
	resume   *time.Timer // grants when a pause is over
	onChange func(limit int)
}

// waiter is an Acquire waiting for a slot; ch is closed when granted.
type waiter struct {
	ch       chan struct{}
	granted  bool
	low      bool // granted during a dip
	inFlight int  // calls in flight once granted
}

// Token is a slot taken by Acquire; give it back to Release.
type Token struct {
	start    time.Time
	low      bool
	inFlight int
}

// InFlight is how many calls were in flight once the slot was granted,
// its own included.
func (t Token) InFlight() int { return t.inFlight }

// Low reports whether the slot was granted during a dip, the calls in
// flight held at half the limit.
func (t Token) Low() bool { return t.low }

// New builds a Limiter.
func New(o Options) (*Limiter, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Limiter{o: o, limit: float64(o.Initial), threshold: float64(o.Max)}, nil
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

// Waiting is how many calls wait for a slot.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retries.Len() + l.firsts.Len()
}

// Paused reports until when the replica was asked to wait (zero when it
// was not, or the time is past).
func (l *Limiter) Paused() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.o.Now().Before(l.pauseUntil) {
		return l.pauseUntil
	}
	return time.Time{}
}

// Pause holds every new call for d from now, on the limiter's clock (a
// pause that ends later is kept): it returns when the pause ends, and
// whether it now ends later than before. The engine's view decides when
// the replica as a whole must wait.
func (l *Limiter) Pause(d time.Duration) (until time.Time, later bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now()
	until = now.Add(d)
	if !until.After(l.pauseUntil) {
		return l.pauseUntil, false
	}
	l.pauseUntil = until
	if l.resume != nil {
		l.resume.Stop()
		l.resume = nil
	}
	l.schedule(now)
	return until, true
}

// Dip holds the calls in flight at half the limit (one at least, below Min
// too) for span, from in from now on the limiter's clock: the engine's view
// asks for it to see whether the engine answers differently when the
// replica sends less. A slot granted meanwhile is Low. A dip asked for
// while one is pending replaces it.
func (l *Limiter) Dip(in, span time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if span <= 0 {
		return
	}
	now := l.o.Now()
	l.dipFrom, l.dipUntil, l.held = now.Add(in), now.Add(in+span), 0
	if l.resume != nil {
		l.resume.Stop()
		l.resume = nil
	}
	l.schedule(now)
}

// EndDip ends the dip under way, or cancels the one pending: the trial
// that asked for it was decided.
func (l *Limiter) EndDip() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now()
	if !now.Before(l.dipUntil) {
		return
	}
	l.dipFrom, l.dipUntil, l.held = time.Time{}, time.Time{}, 0
	if l.resume != nil {
		l.resume.Stop()
		l.resume = nil
	}
	l.grant(now)
}

// dipping reports whether now is within the dip. Locked.
func (l *Limiter) dipping(now time.Time) bool {
	return !now.Before(l.dipFrom) && now.Before(l.dipUntil)
}

// Acquire waits for a slot: fewer calls in flight than the limit, and no
// pause. A retry (a read that failed before) is granted before any first
// attempt, so that a retry that is due is never starved by new reads;
// within each, slots go in the order asked. It returns ctx's error if ctx
// ends first.
func (l *Limiter) Acquire(ctx context.Context, retry bool) (Token, error) {
	l.mu.Lock()
	now := l.o.Now()
	if l.retries.Len() == 0 && (retry || l.firsts.Len() == 0) && l.free(now) {
		l.take(now)
		tk := Token{start: now, low: l.dipping(now), inFlight: l.inFlight}
		l.mu.Unlock()
		return tk, nil
	}
	w := &waiter{ch: make(chan struct{})}
	q := &l.firsts
	if retry {
		q = &l.retries
	}
	e := q.PushBack(w)
	l.schedule(now)
	l.mu.Unlock()
	select {
	case <-w.ch:
		return Token{start: l.o.Now(), low: w.low, inFlight: w.inFlight}, nil
	case <-ctx.Done():
		l.mu.Lock()
		if w.granted {
			l.inFlight-- // granted as ctx ended: give it to the next
			l.grant(l.o.Now())
		} else {
			q.Remove(e)
		}
		l.mu.Unlock()
		return Token{}, ctx.Err()
	}
}

// free reports whether a call may start now: no pause, and fewer calls in
// flight than the limit (half of it during a dip). Locked.
func (l *Limiter) free(now time.Time) bool {
	lim := int(l.limit)
	if l.dipping(now) {
		lim = l.dipLevel(lim)
	}
	return !now.Before(l.pauseUntil) && l.inFlight < lim
}

// dipLevel is the calls in flight a dip holds, given the limit: an
// experiment, not the limit, so below Min too; half of what the replica
// sent since the last dip, which is less than its limit when it has fewer
// reads to call or no CPU to call them faster (4 replicas on 2 cores
// against an engine failing 40% at random had 8 calls in flight at a limit
// of 16: a dip to 8 sent as much as outside it, and no trial decided in
// 2s). Set when the dip begins. Locked.
func (l *Limiter) dipLevel(limit int) int {
	if l.held == 0 {
		base := limit
		if l.peak > 0 {
			base = min(limit, l.peak)
		}
		l.held, l.peak = max(1, base/2), 0
	}
	return l.held
}

// take counts a call in flight. Locked.
func (l *Limiter) take(now time.Time) {
	l.inFlight++
	if !l.dipping(now) {
		l.peak = max(l.peak, l.inFlight)
	}
	if l.inFlight >= int(l.limit) {
		l.full = now
	}
}

// grant gives free slots to the first waiters, retries first, as of now.
// Locked.
func (l *Limiter) grant(now time.Time) {
	for _, q := range []*list.List{&l.retries, &l.firsts} {
		for q.Len() > 0 && l.free(now) {
			w := q.Remove(q.Front()).(*waiter)
			w.granted, w.low = true, l.dipping(now)
			l.take(now)
			w.inFlight = l.inFlight
			close(w.ch)
		}
	}
	l.schedule(now)
}

// schedule makes sure waiters held by a pause or a dip are granted when
// it is over; now is the caller's reading of the clock. Locked.
func (l *Limiter) schedule(now time.Time) {
	if l.retries.Len()+l.firsts.Len() == 0 || l.resume != nil {
		return
	}
	wait := l.pauseUntil.Sub(now)
	if l.dipping(now) {
		wait = max(wait, l.dipUntil.Sub(now))
	}
	if wait <= 0 {
		return
	}
	l.resume = time.AfterFunc(wait, func() {
		l.mu.Lock()
		l.resume = nil
		l.grant(l.o.Now())
		l.mu.Unlock()
	})
}

// Release gives back t's slot with what the engine's view made of the call.
func (l *Limiter) Release(t Token, s Signal) {
	l.mu.Lock()
	now := l.o.Now()
	before := int(l.limit)
	rtt := now.Sub(t.start)
	switch s {
	case Answered:
		if t.low || l.dipping(now) {
			l.smooth(rtt) // a dip's calls say nothing of the room at the full limit
		} else {
			l.answered(now, rtt)
		}
	case Queued:
		l.smooth(rtt)
		l.decrease(now, l.o.Backoff, false)
	case Overloaded, Paced:
		l.decrease(now, l.o.ShedBackoff, true)
	}
	keep := time.Duration(0)
	switch {
	case s == Answered || s == Queued || s == Held:
		l.served = true
	case s == Paced:
		keep = l.srtt - rtt
	case (s == Refused || s == Overloaded) && !l.served:
		keep = unservedHold(l.refusals)
		l.refusals++
	}
	if keep > 0 {
		time.AfterFunc(keep, func() {
			l.mu.Lock()
			l.inFlight--
			l.grant(l.o.Now())
			l.mu.Unlock()
		})
	} else {
		l.inFlight--
		l.grant(now) // the same reading: the slot came free as the call ended
	}
	after := int(l.limit)
	f := l.onChange
	l.mu.Unlock()
	if f != nil && after != before {
		f(after)
	}
}

// unservedHold is how long a slot is kept after the n+1th call in a row
// refused by an engine that has not answered the replica once: from
// firstHold, doubling, up to maxHold, as a connection's first packet is
// sent again after a timeout that doubles (RFC 6298, 5.5). With no call
// answered, nothing says that calling again at once gets one answered:
// sent again as soon as refused, one replica called an engine down from
// its start 2,339 times in the second before its breaker opened (96 with
// the slot kept). maxHold keeps a replica joining an engine that others
// keep full in the race for its free slots: refused 97% of its calls, it
// is answered within about 33 calls, a third of a second at 10ms apart.
func unservedHold(n int) time.Duration {
	return min(maxHold, firstHold<<min(n, 16))
}

const (
	firstHold = time.Millisecond
	maxHold   = 10 * time.Millisecond
)

// smooth learns a round trip, to pace decreases by. Locked.
func (l *Limiter) smooth(rtt time.Duration) {
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 8
	}
}

// answered grows a limit in use. Locked.
func (l *Limiter) answered(now time.Time, rtt time.Duration) {
	l.smooth(rtt)
	// Grow only a limit in use (reached within the last two round trips):
	// a limit that idle periods grew would let a burst through at once.
	if now.Sub(l.full) > 2*max(l.srtt, time.Millisecond) {
		return
	}
	if l.limit < l.threshold {
		l.limit++ // slow start: doubles each round trip
	} else if l.wMax > 0 {
		l.cubic(now)
	} else {
		// One more each round trip, or each Growth if that is longer.
		step := 1.0
		if l.o.Growth > 0 && l.srtt < l.o.Growth {
			step = float64(l.srtt) / float64(l.o.Growth)
		}
		// A whole limit's worth of answered calls, each worth step, is one
		// more: counted apart, so that many small steps add up exactly.
		l.credit += step
		if l.credit >= math.Floor(l.limit)-1e-9 {
			l.credit = 0
			l.limit = math.Floor(l.limit) + 1
		}
	}
	l.limit = math.Min(l.limit, float64(l.o.Max))
}

// Mark notes the limit now, for Restore: the engine's view marks it when
// it starts trying the engine, whose sheds may come down the limit meanwhile.
func (l *Limiter) Mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark = l.limit
}

// Restore sets the limit back to the last mark, if it is lower, and lets
// it grow by slow start again: the view found the sheds it came down on
// the reads' own, no sign of the engine's load.
func (l *Limiter) Restore() {
	l.mu.Lock()
	before := int(l.limit)
	if l.mark > l.limit {
		l.limit = l.mark
	}
	l.threshold = float64(l.o.Max)
	l.grant(l.o.Now())
	after, f := int(l.limit), l.onChange
	l.mu.Unlock()
	if f != nil && after != before {
		f(after)
	}
}

// SlowStart lets the limit grow by slow start again from where it is (one
// more for each call answered, doubling each round trip), up to Max: what
// brought it down said nothing of the downstream's capacity. The breaker
// closing after an outage says so: the limit fell on the refusals of an
// engine that served no one, and grown one call per Growth from there, a
// replica took 6s to drain a backlog of 3,000 the engine served in 1.5s.
func (l *Limiter) SlowStart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.threshold = float64(l.o.Max)
	l.credit = 0
}

// decrease lowers the limit on a sign of overload, once per smoothed
// latency: the calls of one round trip all tell of the same overload.
// Locked.
func (l *Limiter) decrease(now time.Time, by float64, shed bool) {
	if !l.decreased.IsZero() && now.Sub(l.decreased) < max(l.srtt, time.Millisecond) {
		return
	}
	l.decreased = now
	l.wMax = 0
	if shed {
		l.wMax = l.limit
	}
	l.limit = math.Max(float64(l.o.Min), l.limit*by)
	l.threshold = l.limit
	l.credit = 0
}

// cubic grows a limit in use past a shed toward the cubic function of the
// time since the decrease, t: W(t) = C(t-K)^3 + wMax, back at the limit it
// fell from (wMax) after K = cbrt(wMax(1-ShedBackoff)/C) seconds, flat
// around it, then faster, each answered call adding (W-limit)/limit, one
// at most (RFC 9438's window, in calls). Locked.
func (l *Limiter) cubic(now time.Time) {
	t := now.Sub(l.decreased).Seconds()
	k := math.Cbrt(l.wMax * (1 - l.o.ShedBackoff) / cubicC)
	if w := cubicC*math.Pow(t-k, 3) + l.wMax; w > l.limit {
		l.limit += math.Min(1, (w-l.limit)/l.limit)
	}
}

// cubicC is the cubic's scale, in calls a second cubed: TCP's 0.4 (RFC
// 9438), a window of 2 back after 1.4s, of 20 after 2.9s.
const cubicC = 0.4
