package budget

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/clock"
)

// Options configures a Budget. Ratio and Window are required and
// MinPerSecond is taken as given (0: no floor): their defaults are the
// binary's (package config), so this package has none of its own.
type Options struct {
	Ratio        float64       // retries per first attempt over the window, > 0
	MinPerSecond float64       // retries allowed however few the first attempts, >= 0
	Window       time.Duration // the sliding window, > 0
	Clock        clock.Clock   // the window runs on its monotonic clock (default clock.System())
}

// ErrOption wraps an option that is missing or out of range.
var ErrOption = errors.New("budget: invalid option")

const buckets = 10

// Budget counts first attempts and retries over a sliding window of ten
// buckets and allows a retry while retries stay within the budget.
type Budget struct {
	o       Options
	mu      sync.Mutex
	buckets [buckets]bucket
}

type bucket struct {
	epoch           int64
	firsts, retries float64
}

// New builds a Budget.
func New(o Options) (*Budget, error) {
	switch {
	case o.Ratio <= 0:
		return nil, fmt.Errorf("%w: Ratio (%v) must be > 0 (its default is the binary's, in package config)", ErrOption, o.Ratio)
	case o.MinPerSecond < 0:
		return nil, fmt.Errorf("%w: MinPerSecond (%v) must be >= 0", ErrOption, o.MinPerSecond)
	case o.Window <= 0:
		return nil, fmt.Errorf("%w: Window (%s) must be > 0 (its default is the binary's, in package config)", ErrOption, o.Window)
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	return &Budget{o: o}, nil
}

func (b *Budget) width() int64 { return max(int64(b.o.Window/buckets), 1) }

// current returns the bucket of now, emptied if it held an older epoch. Locked.
func (b *Budget) current(now time.Duration) *bucket {
	e := int64(now) / b.width()
	s := &b.buckets[e%buckets]
	if s.epoch != e {
		*s = bucket{epoch: e}
	}
	return s
}

// First records a first attempt.
func (b *Budget) First() {
	b.mu.Lock()
	b.current(b.o.Clock.Mono()).firsts++
	b.mu.Unlock()
}

// Spend records a retry made whatever the budget says (one the caller
// let through because the downstream is not overloaded), so that it
// counts if the budget must be enforced soon after.
func (b *Budget) Spend() {
	b.mu.Lock()
	b.current(b.o.Clock.Mono()).retries++
	b.mu.Unlock()
}

// Window is the sliding window the budget counts over.
func (b *Budget) Window() time.Duration { return b.o.Window }

// Allow spends a retry if the budget has one, and reports whether it did.
func (b *Budget) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.o.Clock.Mono()
	e := int64(now) / b.width()
	var firsts, retries float64
	for _, s := range b.buckets {
		if e-s.epoch < buckets {
			firsts += s.firsts
			retries += s.retries
		}
	}
	if retries+1 > b.o.Ratio*firsts+b.o.MinPerSecond*b.o.Window.Seconds() {
		return false
	}
	b.current(now).retries++
	return true
}
