package retry

import (
	"errors"
	"math"
	"time"
)

// Policy is a full-jitter exponential backoff policy. Attempts are numbered
// from 1: attempt 1 is the first delivery.
type Policy struct {
	Base          time.Duration // ceiling of the first delay; > 0
	Cap           time.Duration // largest ceiling of any delay; >= Base
	MaxAttempts   int           // calls in all, first delivery included; >= 1
	MaxServerWait time.Duration // largest wait a downstream may ask for (Retry-After); >= 0, 0 ignores it
}

// Validate returns nil if the policy is usable, or every violation joined with
// errors.Join. Each violation matches [ErrInvalidPolicy].
func (p Policy) Validate() error {
	var errs []error
	if p.Base <= 0 {
		errs = append(errs, invalidf("retry base (%s) must be > 0", p.Base))
	}
	if p.Cap < p.Base {
		errs = append(errs, invalidf("retry cap (%s) must be >= retry base (%s)", p.Cap, p.Base))
	}
	if p.MaxAttempts < 1 {
		errs = append(errs, invalidf("retry max attempts (%d) must be >= 1", p.MaxAttempts))
	}
	if p.MaxServerWait < 0 {
		errs = append(errs, invalidf("retry max server wait (%s) must be >= 0", p.MaxServerWait))
	}
	return errors.Join(errs...)
}

// Ceiling returns min(Cap, Base·2^(attempt-1)), the top of the jitter band for
// a 1-based attempt. Attempt 0 is treated as 1. The arithmetic is integer
// only and never overflows: any attempt large enough to pass Cap gives Cap.
// On a policy that fails Validate the result still lies in [0, max(Cap, 0)].
func (p Policy) Ceiling(attempt uint64) time.Duration {
	if p.Base <= 0 || p.Cap <= 0 {
		return 0
	}
	shift := uint64(0)
	if attempt > 1 {
		shift = attempt - 1
	}
	// Base >= 1, so Base<<63 or more is past any int64, hence past Cap.
	// Below that, Base<<shift > Cap exactly when Base > Cap>>shift, which
	// compares without forming the product.
	if shift >= 63 || p.Base > p.Cap>>shift {
		return p.Cap
	}
	return p.Base << shift
}

// Delay draws the wait after a failed attempt uniformly from the closed band
// [0, Ceiling(attempt)], to the nanosecond. It takes exactly one draw from r.
//
// A ceiling of math.MaxInt64 (only with Cap = math.MaxInt64, about 292 years)
// has no representable n+1, so that band is drawn as [0, math.MaxInt64-1].
func (p Policy) Delay(attempt uint64, r Source) time.Duration {
	ceiling := int64(p.Ceiling(attempt))
	if ceiling == math.MaxInt64 {
		return time.Duration(r.Int64N(math.MaxInt64))
	}
	return time.Duration(r.Int64N(ceiling + 1))
}

// DelayWithFloor returns max(Delay(attempt, r), min(retryAfter, MaxServerWait)):
// the jittered delay, raised to what the downstream asked for, but never
// raised past MaxServerWait. A retryAfter <= 0 means the downstream did not
// ask. It always takes exactly one draw from r, so a seeded schedule is the
// same whether or not a floor is given.
func (p Policy) DelayWithFloor(attempt uint64, r Source, retryAfter time.Duration) time.Duration {
	d := p.Delay(attempt, r)
	if retryAfter <= 0 {
		return d
	}
	floor := max(min(retryAfter, p.MaxServerWait), 0)
	return max(d, floor)
}

// Exhausted reports whether attempt was the last one allowed: attempt >=
// MaxAttempts, so no retry follows it. A MaxAttempts below 1 exhausts every
// attempt.
func (p Policy) Exhausted(attempt uint64) bool {
	if p.MaxAttempts < 1 {
		return true
	}
	return attempt >= uint64(p.MaxAttempts)
}
