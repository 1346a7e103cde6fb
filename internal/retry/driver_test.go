package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
)

var (
	errBoom      = errors.New("boom")
	errPermanent = errors.New("bad request")
)

// fakeSleep records the delays asked for and never waits.
type fakeSleep struct {
	delays []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.delays = append(f.delays, d)
	return ctx.Err()
}

// script returns an op that returns give[i] on call i and counts its calls.
// Past the end of give it keeps returning the last entry.
func script(calls *int, give ...error) func(context.Context) error {
	return func(context.Context) error {
		i := min(*calls, len(give)-1)
		*calls++
		return give[i]
	}
}

func seededDriver(s *fakeSleep) retry.Driver {
	return retry.Driver{
		Policy: policy(),
		Rand:   retry.NewRand(seed),
		Sleep:  s.sleep,
	}
}

func TestDriverDoExhausted(t *testing.T) {
	var s fakeSleep
	d := seededDriver(&s)
	d.Transient = func(error) bool { return true }
	calls := 0
	err := d.Do(context.Background(), func(context.Context) error {
		calls++
		return fmt.Errorf("attempt %d: %w", calls, errBoom)
	})

	assert.Equal(t, 6, calls)
	assert.Equal(t, seededSchedule[:5], s.delays)
	var exhausted *retry.ExhaustedError
	require.ErrorAs(t, err, &exhausted)
	assert.Equal(t, 6, exhausted.Attempts)
	assert.EqualError(t, exhausted.Err, "attempt 6: boom")
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.ErrorIs(t, err, errBoom)
	assert.EqualError(t, err, "gave up after 6 attempts: attempt 6: boom")
}

func TestDriverDo(t *testing.T) {
	isTransient := func(err error) bool { return !errors.Is(err, errPermanent) }
	tests := []struct {
		name       string
		transient  func(error) bool
		retryAfter func(error) time.Duration
		give       []error // what op returns on each call
		wantCalls  int
		wantSleeps []time.Duration
		wantErr    error // nil for success; matched with errors.Is
	}{
		{
			name:      "success at once",
			transient: isTransient,
			give:      []error{nil},
			wantCalls: 1,
		},
		{
			name:      "permanent error at once",
			transient: isTransient,
			give:      []error{errPermanent},
			wantCalls: 1,
			wantErr:   errPermanent,
		},
		{
			name:       "permanent after a transient",
			transient:  isTransient,
			give:       []error{errBoom, errPermanent},
			wantCalls:  2,
			wantSleeps: seededSchedule[:1],
			wantErr:    errPermanent,
		},
		{
			name:       "succeed on third",
			transient:  isTransient,
			give:       []error{errBoom, errBoom, nil},
			wantCalls:  3,
			wantSleeps: seededSchedule[:2],
		},
		{
			name:       "succeed on last",
			transient:  isTransient,
			give:       []error{errBoom, errBoom, errBoom, errBoom, errBoom, nil},
			wantCalls:  6,
			wantSleeps: seededSchedule[:5],
		},
		{
			name:       "nil transient retries everything",
			give:       []error{errPermanent},
			wantCalls:  6,
			wantSleeps: seededSchedule[:5],
			wantErr:    retry.ErrExhausted,
		},
		{
			name:       "retry after raises short delays",
			transient:  isTransient,
			retryAfter: func(error) time.Duration { return time.Second },
			give:       []error{errBoom},
			wantCalls:  6,
			wantSleeps: []time.Duration{time.Second, time.Second, time.Second, time.Second, seededSchedule[4]},
			wantErr:    errBoom,
		},
		{
			name:       "retry after clamped to max server wait",
			transient:  isTransient,
			retryAfter: func(error) time.Duration { return time.Hour },
			give:       []error{errBoom, nil},
			wantCalls:  2,
			wantSleeps: []time.Duration{5 * time.Minute},
		},
		{
			name:       "retry after of zero ignored",
			transient:  isTransient,
			retryAfter: func(error) time.Duration { return 0 },
			give:       []error{errBoom, errBoom, nil},
			wantCalls:  3,
			wantSleeps: seededSchedule[:2],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s fakeSleep
			d := seededDriver(&s)
			d.Transient = tt.transient
			d.RetryAfter = tt.retryAfter
			calls := 0

			err := d.Do(context.Background(), script(&calls, tt.give...))

			assert.Equal(t, tt.wantCalls, calls)
			assert.Equal(t, tt.wantSleeps, s.delays)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestDriverDoPermanentUnchanged(t *testing.T) {
	var s fakeSleep
	d := seededDriver(&s)
	d.Transient = func(error) bool { return false }
	calls := 0
	err := d.Do(context.Background(), script(&calls, errPermanent))
	assert.Same(t, errPermanent, err)
	assert.Equal(t, 1, calls)
	assert.Empty(t, s.delays)
}

func TestDriverDoRetryAfterSeesError(t *testing.T) {
	var s fakeSleep
	d := seededDriver(&s)
	var seen []error
	d.RetryAfter = func(err error) time.Duration {
		seen = append(seen, err)
		return 0
	}
	calls := 0
	err := d.Do(context.Background(), script(&calls, errBoom, errPermanent, nil))
	require.NoError(t, err)
	assert.Equal(t, []error{errBoom, errPermanent}, seen)
}

func TestDriverDoSingleAttempt(t *testing.T) {
	var s fakeSleep
	d := seededDriver(&s)
	d.Policy.MaxAttempts = 1
	calls := 0
	err := d.Do(context.Background(), script(&calls, errBoom))
	var exhausted *retry.ExhaustedError
	require.ErrorAs(t, err, &exhausted)
	assert.Equal(t, 1, exhausted.Attempts)
	assert.Equal(t, 1, calls)
	assert.Empty(t, s.delays)
}

func TestDriverDoInvalidPolicy(t *testing.T) {
	calls := 0
	err := retry.Driver{}.Do(context.Background(), script(&calls, nil))
	assert.ErrorIs(t, err, retry.ErrInvalidPolicy)
	assert.Zero(t, calls)
}

func TestDriverDoCancelledBeforeFirstCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var s fakeSleep
	calls := 0
	err := seededDriver(&s).Do(ctx, script(&calls, nil))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, calls)
	assert.Empty(t, s.delays)
}

func TestDriverDoCancelledDuringFakeSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delays []time.Duration
	d := retry.Driver{
		Policy: policy(),
		Rand:   retry.NewRand(seed),
		Sleep: func(ctx context.Context, d time.Duration) error {
			delays = append(delays, d)
			if len(delays) == 2 {
				cancel()
			}
			return ctx.Err()
		},
	}
	calls := 0
	err := d.Do(ctx, script(&calls, errBoom))

	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, errBoom)
	assert.NotErrorIs(t, err, retry.ErrExhausted)
	assert.EqualError(t, err, "retry stopped after 2 attempts: context canceled: boom")
	assert.Equal(t, 2, calls)
	assert.Equal(t, seededSchedule[:2], delays)
}

func TestDriverDoCancelledDuringRealSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := policy()
	p.MaxServerWait = time.Hour
	d := retry.Driver{
		Policy:     p,
		RetryAfter: func(error) time.Duration { return time.Hour }, // forces a long sleep
	}
	calls := 0
	start := time.Now()
	err := d.Do(ctx, func(context.Context) error {
		calls++
		time.AfterFunc(10*time.Millisecond, cancel)
		return errBoom
	})

	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, errBoom)
	assert.Equal(t, 1, calls)
	assert.Less(t, time.Since(start), time.Minute)
}

func TestDriverDoDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d := retry.Driver{
		Policy: retry.Policy{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxAttempts: 1_000_000},
	}
	calls := 0
	err := d.Do(ctx, script(&calls, errBoom))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, errBoom)
	assert.Greater(t, calls, 1)
}

func TestDriverDoRealSleepCompletes(t *testing.T) {
	d := retry.Driver{
		Policy: retry.Policy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 3},
		Rand:   retry.NewRand(seed),
	}
	calls := 0
	err := d.Do(context.Background(), script(&calls, errBoom, errBoom, nil))
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
}

func TestExhaustedError(t *testing.T) {
	tests := []struct {
		name string
		give *retry.ExhaustedError
		want string
	}{
		{name: "with error", give: &retry.ExhaustedError{Attempts: 3, Err: errBoom}, want: "gave up after 3 attempts: boom"},
		{name: "without error", give: &retry.ExhaustedError{Attempts: 3}, want: "gave up after 3 attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.EqualError(t, tt.give, tt.want)
			assert.ErrorIs(t, tt.give, retry.ErrExhausted)
		})
	}
}

// Notify hears of every failed attempt that is retried, with the delay
// slept after it, and of none that is not.
func TestDriverNotifiesEachRetry(t *testing.T) {
	var s fakeSleep
	d := seededDriver(&s)
	type note struct {
		attempt int
		err     error
		next    time.Duration
	}
	var notes []note
	d.Notify = func(attempt int, err error, next time.Duration) { notes = append(notes, note{attempt, err, next}) }
	calls := 0
	err := d.Do(context.Background(), script(&calls, errBoom, errBoom, nil))
	require.NoError(t, err)
	assert.Equal(t, []note{{1, errBoom, seededSchedule[0]}, {2, errBoom, seededSchedule[1]}}, notes)
	assert.Equal(t, seededSchedule[:2], s.delays)
}

// With Forever attempts, the loop ends only with its context.
func TestDriverForeverEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	d := retry.Driver{
		Policy: retry.Policy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: retry.Forever},
		Rand:   retry.NewRand(seed),
		Sleep: func(ctx context.Context, _ time.Duration) error {
			if calls == 1000 {
				cancel()
			}
			return ctx.Err()
		},
	}
	err := d.Do(ctx, script(&calls, errBoom))
	assert.Equal(t, 1000, calls)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, errBoom)
}
