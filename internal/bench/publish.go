package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// publishWindow bounds the asynchronous publishes in flight.
const publishWindow = 4096

// publishBacklog publishes reads [from, from+n) asynchronously, at most
// publishWindow in flight, and returns the stream sequence of the last one.
func publishBacklog(ctx context.Context, js jetstream.JetStream, from, n int) (uint64, error) {
	return publishBodies(ctx, js, from, n, Body)
}

// publishBodies is publishBacklog with body(i) as read i.
func publishBodies(ctx context.Context, js jetstream.JetStream, from, n int, body func(int) []byte) (uint64, error) {
	var last uint64
	futs := make([]jetstream.PubAckFuture, 0, publishWindow)
	settle := func() error {
		for _, f := range futs {
			seq, err := await(ctx, f)
			if err != nil {
				return err
			}
			last = max(last, seq)
		}
		futs = futs[:0]
		return nil
	}
	for i := from; i < from+n; i++ {
		f, err := js.PublishAsync(subject, body(i))
		if err != nil {
			return 0, fmt.Errorf("publish read %d: %w", i, err)
		}
		futs = append(futs, f)
		if len(futs) == publishWindow {
			if err := settle(); err != nil {
				return 0, err
			}
		}
	}
	return last, settle()
}

// await returns the stream sequence JetStream stored a publish at.
func await(ctx context.Context, f jetstream.PubAckFuture) (uint64, error) {
	select {
	case ack := <-f.Ok():
		return ack.Sequence, nil
	case err := <-f.Err():
		return 0, fmt.Errorf("publish: %w", err)
	case <-ctx.Done():
		return 0, fmt.Errorf("publish: %w", ctx.Err())
	}
}

// publishPaced publishes reads 0, 1, ... at rate per second for d and
// returns the stream sequence of each, by read index.
func publishPaced(ctx context.Context, js jetstream.JetStream, rate int, d time.Duration) ([]uint64, error) {
	const tick = 5 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var futs []jetstream.PubAckFuture
	start := time.Now()
	for {
		elapsed := time.Since(start)
		due := int(int64(rate) * int64(min(elapsed, d)) / int64(time.Second))
		for i := len(futs); i < due; i++ {
			f, err := js.PublishAsync(subject, Body(i))
			if err != nil {
				return nil, fmt.Errorf("publish read %d: %w", i, err)
			}
			futs = append(futs, f)
		}
		if elapsed >= d {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	seqs := make([]uint64, len(futs))
	for i, f := range futs {
		seq, err := await(ctx, f)
		if err != nil {
			return nil, err
		}
		seqs[i] = seq
	}
	return seqs, nil
}
