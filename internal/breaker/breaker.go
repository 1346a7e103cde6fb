package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/retry"
)

// State is the breaker's state; its value is the meter_consumer_breaker_state gauge.
type State int

// The states.
const (
	Closed   State = 0
	Open     State = 1
	HalfOpen State = 2
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "closed"
}

// Options configures a Breaker. Window, MinCalls, FailureRatio, CoolDown,
// MaxCoolDown and Probes are required: their defaults are the binary's
// (package config), so this package has none of its own.
type Options struct {
	Window       time.Duration // sliding window of outcomes
	MinCalls     int           // calls in the window before it may open
	FailureRatio float64       // share of transient failures that opens it, in (0, 1]
	CoolDown     time.Duration // mean wait before probing, jittered ±50%
	MaxCoolDown  time.Duration // bound of a cool-down that grows while probes fail (>= CoolDown)
	Probes       int           // calls let through when half-open

	// Silent, when set, reports whether the downstream serves no one now
	// (it has failed every call for a while without answering one): the
	// breaker opens from closed only then, whatever its window holds, so
	// that quick refusals of a downstream that serves others (its load, or
	// the reads' own) never open it. nil: always silent.
	Silent func() bool

	Rand      retry.Source                       // jitter (nil, in tests: seeded from the clock; the binary passes service.Deps.Rand, as stream.Engine does)
	Clock     clock.Clock                        // the window runs on its monotonic clock (default clock.System())
	AfterFunc func(time.Duration, func()) func() // timer (default time.AfterFunc); returns stop
}

// ErrOption wraps an option that is missing or out of range.
var ErrOption = errors.New("breaker: invalid option")

func (o *Options) defaults() error {
	for _, c := range []struct {
		bad  bool
		name string
		want string
	}{
		{o.Window <= 0, "Window", "> 0"},
		{o.MinCalls < 1, "MinCalls", ">= 1"},
		{o.FailureRatio <= 0 || o.FailureRatio > 1, "FailureRatio", "in (0, 1]"},
		{o.CoolDown <= 0, "CoolDown", "> 0"},
		{o.MaxCoolDown < o.CoolDown, "MaxCoolDown", ">= CoolDown"},
		{o.Probes < 1, "Probes", ">= 1"},
	} {
		if c.bad {
			return fmt.Errorf("%w: %s must be %s (its default is the binary's, in package config)", ErrOption, c.name, c.want)
		}
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(time.Now().UnixNano()))
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.AfterFunc == nil {
		o.AfterFunc = func(d time.Duration, f func()) func() {
			t := time.AfterFunc(d, f)
			return func() { t.Stop() }
		}
	}
	return nil
}

const buckets = 10

// Breaker is a circuit breaker. Build it with New.
type Breaker struct {
	o Options

	fast atomic.Int32 // the state, read without the lock on the hot path
	win  [buckets]bucket

	mu        sync.Mutex
	state     State
	changed   chan struct{} // closed and replaced on every transition
	round     uint64        // half-open rounds so far; a probe belongs to one
	probes    int           // probes in flight (half-open)
	successes int           // successful probes (half-open)
	failures  int           // failed probes of reads that failed before (half-open)
	fresh     int           // fresh reads waiting in Acquire while not closed
	freed     chan struct{} // closed and replaced when a probe's place is freed
	reopens   int           // consecutive failed probe rounds
	stopTimer func()
	onChange  []func(from, to State) // OnChange's, in the order added; replaced, never changed in place
}

// bucket counts the calls of one Window/buckets slot of time; epoch is the
// slot's index (the monotonic clock's reading / width: a step of the wall
// clock moves no slot). Successes are counted without the lock.
type bucket struct {
	epoch           atomic.Int64
	calls, failures atomic.Int64
}

// Permit is what Acquire hands out; give it back to Done, or to Release
// when the call ended without an answer about the downstream.
type Permit struct {
	probe bool
	fresh bool   // the read had not failed before
	round uint64 // the half-open round a probe belongs to
}

// Probe reports whether the call was let through as a half-open probe.
func (p Permit) Probe() bool { return p.probe }

// Fresh reports whether the permit was asked for a read that had not
// failed before.
func (p Permit) Fresh() bool { return p.fresh }

// New builds a closed Breaker.
func New(o Options) (*Breaker, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Breaker{o: o, changed: make(chan struct{}), freed: make(chan struct{})}, nil
}

// OnChange adds f to the functions called after each transition, outside
// the lock, in the order they were added: stream.New adds the consumer's
// (its metrics, its log, the limit's slow start), so a function added
// after it runs after it.
func (b *Breaker) OnChange(f func(from, to State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onChange = append(b.onChange[:len(b.onChange):len(b.onChange)], f)
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Changed returns a channel closed at the next transition.
func (b *Breaker) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Acquire waits until a call may go through: at once when closed, as one
// of the probes when half-open, and not before the cool-down when open.
// fresh says the read has not failed before: only fresh reads are evidence
// of an outage, and a half-open round is probed with fresh reads whenever
// any is waiting (a read that failed before probes only when none is).
func (b *Breaker) Acquire(ctx context.Context, fresh bool) (Permit, error) {
	if State(b.fast.Load()) == Closed {
		return Permit{fresh: fresh}, nil
	}
	waiting := false
	defer func() {
		if waiting {
			b.mu.Lock()
			b.unwait()
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		switch {
		case b.state == Closed:
			b.mu.Unlock()
			return Permit{fresh: fresh}, nil
		case b.state == HalfOpen && b.probes+b.successes < b.o.Probes && (fresh || b.fresh == 0):
			b.probes++
			round := b.round
			if waiting {
				b.unwait()
				waiting = false
			}
			b.mu.Unlock()
			return Permit{probe: true, fresh: fresh, round: round}, nil
		}
		if fresh && !waiting {
			b.fresh++
			waiting = true
		}
		ch, freed := b.changed, b.freed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-freed:
		case <-ctx.Done():
			return Permit{}, ctx.Err()
		}
	}
}

// unwait counts a fresh waiter gone; the last one lets the others probe.
// Locked.
func (b *Breaker) unwait() {
	if b.fresh--; b.fresh == 0 {
		b.free()
	}
}

// free wakes the waiters: a probe's place was freed. Locked.
func (b *Breaker) free() {
	close(b.freed)
	b.freed = make(chan struct{})
}

// Done records the outcome of a call made under p: failed is true for a
// transient failure of the downstream (a permanent failure is an answer
// from a healthy downstream: pass false). Only fresh reads count towards
// opening: a read that fails again is evidence about that read. A failed
// probe of a fresh read reopens the breaker; a failed probe of a read that
// failed before does not decide the round alone: its place goes to another
// probe, and the round fails only once Probes such probes failed.
func (b *Breaker) Done(p Permit, failed bool) {
	if !p.probe && (!p.fresh || !failed) && State(b.fast.Load()) == Closed {
		if p.fresh {
			b.count(b.o.Clock.Mono(), false) // a success cannot open it
		} else if failed && b.o.Silent != nil {
			b.recheck() // the window may have been waiting for the silence
		}
		return
	}
	var from, to State
	b.mu.Lock()
	if p.probe {
		if !b.current(p) {
			// A slow probe of an earlier round neither consumes nor
			// decides this one.
			b.mu.Unlock()
			return
		}
		b.probes--
		switch {
		case failed && (p.fresh || b.failures+1 >= b.o.Probes):
			from, to = b.transition(Open)
		case failed:
			b.failures++
			b.free()
		default:
			if b.successes++; b.successes >= b.o.Probes {
				from, to = b.transition(Closed)
			}
		}
	} else if b.state == Closed && p.fresh {
		from, to = b.record(failed)
	}
	b.mu.Unlock()
	b.notify(from, to)
}

// Release gives back a permit whose call ended without an answer about the
// downstream (the process is stopping and cut it short): a probe frees its
// place in the round without deciding it, and nothing is counted.
func (b *Breaker) Release(p Permit) {
	if !p.probe {
		return
	}
	b.mu.Lock()
	if b.current(p) {
		b.probes--
		b.free()
	}
	b.mu.Unlock()
}

// current reports whether probe p belongs to the half-open round in
// progress. Locked.
func (b *Breaker) current(p Permit) bool {
	return b.state == HalfOpen && p.round == b.round
}

// width is the time one bucket covers.
func (b *Breaker) width() int64 { return max(int64(b.o.Window/buckets), 1) }

// count adds an outcome to the bucket of now. A bucket is reset when its
// slot comes round again; a count racing that reset may be lost, which a
// breaker can afford.
func (b *Breaker) count(now time.Duration, failed bool) {
	idx := int64(now) / b.width()
	bk := &b.win[idx%buckets]
	for {
		e := bk.epoch.Load()
		if e == idx {
			break
		}
		if e > idx {
			return // a late outcome for a slot already gone
		}
		if bk.epoch.CompareAndSwap(e, idx) {
			bk.calls.Store(0)
			bk.failures.Store(0)
			break
		}
	}
	bk.calls.Add(1)
	if failed {
		bk.failures.Add(1)
	}
}

// recheck opens a closed breaker whose window already holds enough
// failures, once the downstream is silent: a read failing again is no
// evidence itself, but the failures of fresh reads before it may now be.
func (b *Breaker) recheck() {
	var from, to State
	b.mu.Lock()
	if b.state == Closed {
		from, to = b.judge(b.o.Clock.Mono())
	}
	b.mu.Unlock()
	b.notify(from, to)
}

// record counts an outcome in the window and opens when it must. Locked.
func (b *Breaker) record(failed bool) (State, State) {
	now := b.o.Clock.Mono()
	b.count(now, failed)
	return b.judge(now)
}

// judge opens the breaker when the window holds MinCalls or more, a share
// FailureRatio of them failed, and the downstream is silent. Locked.
func (b *Breaker) judge(now time.Duration) (State, State) {
	idx := int64(now) / b.width()
	var calls, failures int64
	for i := range b.win {
		bk := &b.win[i]
		if idx-bk.epoch.Load() < buckets {
			calls += bk.calls.Load()
			failures += bk.failures.Load()
		}
	}
	if calls >= int64(b.o.MinCalls) && float64(failures) >= b.o.FailureRatio*float64(calls) && (b.o.Silent == nil || b.o.Silent()) {
		return b.transition(Open)
	}
	return b.state, b.state
}

// transition moves to s and returns (from, to). Locked.
func (b *Breaker) transition(s State) (State, State) {
	from := b.state
	if from == s {
		return from, s
	}
	b.state = s
	b.fast.Store(int32(s))
	close(b.changed)
	b.changed = make(chan struct{})
	if b.stopTimer != nil {
		b.stopTimer()
		b.stopTimer = nil
	}
	switch s {
	case Open:
		if from == HalfOpen {
			b.reopens++
		}
		wait := b.coolDown()
		b.stopTimer = b.o.AfterFunc(wait, b.halfOpen)
	case HalfOpen:
		b.round++
		b.probes, b.successes, b.failures = 0, 0, 0
	case Closed:
		b.reopens = 0
		for i := range b.win {
			b.win[i].epoch.Store(0)
			b.win[i].calls.Store(0)
			b.win[i].failures.Store(0)
		}
	}
	return from, s
}

// coolDown draws the wait before probing: uniform in [c/2, 3c/2] where c
// doubles with each failed probe round, bounded by MaxCoolDown. Locked.
func (b *Breaker) coolDown() time.Duration {
	c := b.o.CoolDown
	for i := 0; i < b.reopens && c < b.o.MaxCoolDown; i++ {
		c *= 2
	}
	c = min(c, b.o.MaxCoolDown)
	if c <= 0 {
		return 0
	}
	return c/2 + time.Duration(b.o.Rand.Int64N(int64(c)+1))
}

func (b *Breaker) halfOpen() {
	b.mu.Lock()
	var from, to State
	if b.state == Open {
		from, to = b.transition(HalfOpen)
	}
	b.mu.Unlock()
	b.notify(from, to)
}

func (b *Breaker) notify(from, to State) {
	if from == to {
		return
	}
	b.mu.Lock()
	fs := b.onChange
	b.mu.Unlock()
	for _, f := range fs {
		f(from, to)
	}
}

// Stop cancels a pending cool-down timer.
func (b *Breaker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopTimer != nil {
		b.stopTimer()
		b.stopTimer = nil
	}
}
