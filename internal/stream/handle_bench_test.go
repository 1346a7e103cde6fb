package stream

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/internal/retry"
)

// BenchmarkHandle settles a successful read the way a worker does: decode,
// deliver to a no-op sink, ack, metrics, with the production JSON logger at
// info writing nowhere. It excludes the client's metadata parsing (the fake
// returns fixed metadata) and the settlement's network cost.
func BenchmarkHandle(b *testing.B) {
	c, err := New(Options{
		Policy:      retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute},
		Concurrency: 32, AckWait: 30 * time.Second, HandlerTimeout: 6 * time.Second, ShutdownTimeout: 30 * time.Second,
		Sink: boundedNoop{}, SinkTimeout: time.Nanosecond,
		DeadLetter:      &fakeDeadLetter{},
		Metrics:         NewMetrics(prometheus.NewRegistry()),
		Logger:          slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Rand:            retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	msg := &fakeMsg{
		quiet: true,
		data:  []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`),
		md: jetstream.MsgMetadata{
			Sequence:     jetstream.SequencePair{Consumer: 7, Stream: 42},
			NumDelivered: 1,
			Stream:       "METER_READS",
			Consumer:     "meter-consumer",
			Timestamp:    time.Date(2026, 11, 30, 7, 0, 1, 0, time.UTC),
		},
	}
	ctx := context.Background()
	s := c.keep.watches[0]
	b.ReportAllocs()
	b.SetBytes(int64(len(msg.data)))
	for b.Loop() {
		c.handle(ctx, ctx, ctx, msg, s)
	}
}
