package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock reads the wall clock and the monotonic clock.
type Clock interface {
	// Now is the wall clock.
	Now() time.Time
	// Mono is the monotonic clock: the time since the clock's origin.
	Mono() time.Duration
}

// System returns the process's clock: time.Now, and the monotonic reading
// time.Now carries, counted from the call to System.
func System() Clock { return system{origin: time.Now()} }

type system struct{ origin time.Time }

func (s system) Now() time.Time      { return time.Now() }
func (s system) Mono() time.Duration { return time.Since(s.origin) }

// Fake is a manual Clock: it moves only when told. Advance moves both
// clocks; Step moves the wall clock alone, as NTP or an operator does.
type Fake struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

// NewFake returns a Fake whose wall clock reads wall and whose monotonic
// clock reads 0.
func NewFake(wall time.Time) *Fake { return &Fake{wall: wall} }

// Now returns the fake wall clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wall
}

// Mono returns the fake monotonic clock.
func (f *Fake) Mono() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Advance moves both clocks on by d (d >= 0).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
	f.mono += max(d, 0)
}

// Step moves the wall clock alone by d, backwards when d < 0.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
}

// Stepping is the system clock whose wall clock can be stepped, as NTP or
// an operator steps it: Now is the wall reading of time.Now moved by every
// Step so far, without its monotonic reading (so that an interval measured
// with Now, instead of Mono, sees the step), Mono the system's. For tests
// that need real time to pass.
type Stepping struct {
	sys Clock
	off atomic.Int64
}

// NewStepping returns a Stepping clock not stepped yet.
func NewStepping() *Stepping { return &Stepping{sys: System()} }

// Now returns time.Now moved by the steps so far.
func (s *Stepping) Now() time.Time { return time.Now().Round(0).Add(time.Duration(s.off.Load())) }

// Mono returns the system's monotonic clock.
func (s *Stepping) Mono() time.Duration { return s.sys.Mono() }

// Step moves the wall clock by d, backwards when d < 0.
func (s *Stepping) Step(d time.Duration) { s.off.Add(int64(d)) }
