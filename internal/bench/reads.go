package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// readAt is the read time of every benchmark read; meter ids make them
// unique.
const readAt = "2026-11-30T07:00:00Z"

// Body returns read i: about 200 bytes of valid JSON with a unique meter id
// (so a unique derived idempotency key) and a decimal quantity built as a
// string. The fields past unit are unknown to the contract and ignored.
func Body(i int) []byte {
	return fmt.Appendf(make([]byte, 0, 224), `{"meter_id":"MTR-%07d","read_at":"`+readAt+`","quantity":"%d.%03d",`+
		`"unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`, i, 1000+i%9000, i%1000)
}

// Key returns the idempotency key Decode derives for read i.
func Key(i int) string { return fmt.Sprintf("MTR-%07d@%s", i, readAt) }

// Index returns i for the key of read i.
func Index(key string) (int, bool) {
	id, ok := strings.CutSuffix(key, "@"+readAt)
	if id, ok2 := strings.CutPrefix(id, "MTR-"); ok && ok2 {
		i, err := strconv.Atoi(id)
		return i, err == nil && i >= 0
	}
	return 0, false
}

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
		if futs = append(futs, f); len(futs) == publishWindow {
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
	t := time.NewTicker(5 * time.Millisecond)
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
