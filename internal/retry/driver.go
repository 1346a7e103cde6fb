package retry

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Driver calls an operation until it succeeds, fails permanently, runs out of
// attempts or its context ends, sleeping a [Policy] delay between attempts.
type Driver struct {
	Policy Policy
	// Rand supplies the jitter; nil uses the math/rand/v2 top-level generator.
	Rand Source
	// Sleep waits d or until ctx ends, returning ctx.Err() in that case; nil
	// uses a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Transient reports whether err may succeed on a later attempt; nil treats
	// every error as transient.
	Transient func(err error) bool
	// RetryAfter returns how long err asks the caller to wait (<= 0 for no
	// opinion); the wait is a floor for the next delay. It may be nil.
	RetryAfter func(err error) time.Duration
	// Notify, if set, is told of each failed attempt that will be retried,
	// with the delay before the next one, before the sleep: where a caller
	// logs the failure and shows why it waits.
	Notify func(attempt int, err error, next time.Duration)
}

// Forever is a MaxAttempts for a loop that ends only with success, a
// permanent error or its context: the start-up loops that wait for NATS.
const Forever = math.MaxInt

// Do calls op up to Policy.MaxAttempts times, with exactly one sleep between
// consecutive attempts and none after the last. It returns:
//   - nil as soon as op succeeds;
//   - op's error unchanged, without sleeping, if Transient says it is permanent;
//   - an [*ExhaustedError] wrapping the last error once the attempts run out;
//   - an error matching both ctx.Err() and the last error if ctx ends before
//     a call or during a sleep;
//   - the [Policy.Validate] error, without calling op, if the policy is invalid.
func (d Driver) Do(ctx context.Context, op func(ctx context.Context) error) error {
	if err := d.Policy.Validate(); err != nil {
		return err
	}
	src := d.Rand
	if src == nil {
		src = globalSource{}
	}
	sleep := d.Sleep
	if sleep == nil {
		sleep = Sleep
	}

	var last error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return stopped(attempt-1, err, last)
		}
		err := op(ctx)
		if err == nil {
			return nil
		}
		last = err
		if d.Transient != nil && !d.Transient(err) {
			return err
		}
		if d.Policy.Exhausted(uint64(attempt)) {
			return &ExhaustedError{Attempts: attempt, Err: err}
		}
		var floor time.Duration
		if d.RetryAfter != nil {
			floor = d.RetryAfter(err)
		}
		delay := d.Policy.DelayWithFloor(uint64(attempt), src, floor)
		if d.Notify != nil {
			d.Notify(attempt, err, delay)
		}
		if err := sleep(ctx, delay); err != nil {
			return stopped(attempt, err, last)
		}
	}
}

// stopped reports a retry loop cut short by its context after attempts calls.
func stopped(attempts int, ctxErr, last error) error {
	if last == nil {
		return fmt.Errorf("retry stopped before the first attempt: %w", ctxErr)
	}
	return fmt.Errorf("retry stopped after %d attempts: %w: %w", attempts, ctxErr, last)
}

// Sleep waits d, or returns ctx.Err() if ctx ends first (at once when it
// has, or d <= 0). It is the Driver's default sleep.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
