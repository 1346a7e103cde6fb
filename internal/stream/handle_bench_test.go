package stream

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/retry"
)

// BenchmarkHandle settles a successful read the way a worker does: decode,
// deliver to a no-op sink, ack, metrics, with the production JSON logger at
// info writing nowhere. It excludes the client's metadata parsing (the fake
// returns fixed metadata) and the settlement's network cost.
func BenchmarkHandle(b *testing.B) {
	c, msg := benchConsumer(b), benchMsg(42)
	ctx := context.Background()
	s := c.keep.watches[0]
	b.ReportAllocs()
	b.SetBytes(int64(len(msg.data)))
	for b.Loop() {
		c.handle(lifetimes{graceful: ctx, hard: ctx, giveUp: ctx}, owned(msg), s)
	}
}

// BenchmarkHandleParallel is BenchmarkHandle on 32 goroutines at once,
// each a worker with its own keep-alive watch, and with the server's
// clock measured, as in a replica under load: what the workers' shared
// state (the engine's view, the limit, the metrics, the server's clock)
// costs when they all settle at once.
func BenchmarkHandleParallel(b *testing.B) {
	c := benchConsumer(b)
	c.server.last.Store(&measurement{server: time.Now(), mono: c.o.Clock.Mono()})
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg(0).data)))
	b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		s := c.keep.watches[int(i)%len(c.keep.watches)]
		msg := benchMsg(uint64(i))
		for pb.Next() {
			c.handle(lifetimes{graceful: ctx, hard: ctx, giveUp: ctx}, owned(msg), s)
		}
	})
}

// benchConsumer is the consumer of the handle benchmarks.
func benchConsumer(b *testing.B) *Consumer {
	b.Helper()
	c, err := New(Options{
		Policy:      retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute},
		Concurrency: 32, AckWait: 30 * time.Second, HandlerTimeout: 6 * time.Second, ShutdownTimeout: 30 * time.Second,
		Sink: downstream.Discard{}, SinkTimeout: downstream.Discard{}.Timeout(),
		DeadLetter:      &fakeDeadLetter{},
		Metrics:         NewMetrics(prometheus.NewRegistry()),
		Logger:          slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Rand:            retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchMsg is the message a handle benchmark settles, at stream sequence
// seq.
func benchMsg(seq uint64) *fakeMsg {
	return &fakeMsg{
		quiet: true,
		data:  []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`),
		md: jetstream.MsgMetadata{
			Sequence:     jetstream.SequencePair{Consumer: seq, Stream: seq},
			NumDelivered: 1,
			Stream:       "METER_READS",
			Consumer:     "meter-consumer",
			Timestamp:    time.Date(2026, 11, 30, 7, 0, 1, 0, time.UTC),
		},
	}
}
