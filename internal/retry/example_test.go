package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

func ExamplePolicy_Delay() {
	p := retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
	r := retry.NewRand(20261130)
	for attempt := uint64(1); attempt <= 6; attempt++ {
		fmt.Printf("attempt %d: %v of [0, %v]\n", attempt, p.Delay(attempt, r), p.Ceiling(attempt))
	}
	// Output:
	// attempt 1: 347.711532ms of [0, 500ms]
	// attempt 2: 554.888885ms of [0, 1s]
	// attempt 3: 50.267459ms of [0, 2s]
	// attempt 4: 954.707421ms of [0, 4s]
	// attempt 5: 2.013701458s of [0, 8s]
	// attempt 6: 14.796792478s of [0, 16s]
}

func ExamplePolicy_Ceiling() {
	p := retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
	for _, attempt := range []uint64{1, 2, 7, 1 << 63} {
		fmt.Println(attempt, p.Ceiling(attempt))
	}
	// Output:
	// 1 500ms
	// 2 1s
	// 7 30s
	// 9223372036854775808 30s
}

func ExamplePolicy_Validate() {
	p := retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
	p.Cap = 100 * time.Millisecond
	p.MaxAttempts = 0
	err := p.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrInvalidPolicy))
	// Output:
	// retry cap (100ms) must be >= retry base (500ms)
	// retry max attempts (0) must be >= 1
	// true
}

func ExampleDriver_Do() {
	errRefused := errors.New("connection refused")
	d := retry.Driver{
		Policy: retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute},
		Rand:   retry.NewRand(20261130),
		Sleep: func(_ context.Context, d time.Duration) error {
			fmt.Println("sleep", d) // a real driver leaves Sleep nil
			return nil
		},
		Transient: func(err error) bool { return errors.Is(err, errRefused) },
	}
	calls := 0
	err := d.Do(context.Background(), func(context.Context) error {
		calls++
		fmt.Println("connect, attempt", calls)
		if calls < 3 {
			return errRefused
		}
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// connect, attempt 1
	// sleep 347.711532ms
	// connect, attempt 2
	// sleep 554.888885ms
	// connect, attempt 3
	// err: <nil>
}

func ExampleDriver_Do_exhausted() {
	d := retry.Driver{
		Policy: retry.Policy{Base: time.Second, Cap: time.Second, MaxAttempts: 3},
		Rand:   retry.NewRand(1),
		Sleep:  func(context.Context, time.Duration) error { return nil },
	}
	err := d.Do(context.Background(), func(context.Context) error {
		return errors.New("nats: no servers available")
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrExhausted))
	// Output:
	// gave up after 3 attempts: nats: no servers available
	// true
}
