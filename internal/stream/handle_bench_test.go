package stream

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// benchMsg is a jetstream.Msg whose metadata is fixed and whose settlements
// do nothing: it isolates handle from the client and the server.
type benchMsg struct {
	data []byte
	md   *jetstream.MsgMetadata
}

func (m *benchMsg) Metadata() (*jetstream.MsgMetadata, error) { return m.md, nil }
func (m *benchMsg) Data() []byte                              { return m.data }
func (m *benchMsg) Headers() nats.Header                      { return nil }
func (m *benchMsg) Subject() string                           { return "meter.reads.bench" }
func (m *benchMsg) Reply() string                             { return "" }
func (m *benchMsg) Ack() error                                { return nil }
func (m *benchMsg) DoubleAck(context.Context) error           { return nil }
func (m *benchMsg) Nak() error                                { return nil }
func (m *benchMsg) NakWithDelay(time.Duration) error          { return nil }
func (m *benchMsg) InProgress() error                         { return nil }
func (m *benchMsg) Term() error                               { return nil }
func (m *benchMsg) TermWithReason(string) error               { return nil }

// boundedNoop answers at once; given as bounded (SinkTimeout), like the
// production HTTP sink, so handle adds no timeout of its own.
type boundedNoop struct{}

func (boundedNoop) Deliver(context.Context, meter.Read) error { return nil }

type nopDeadLetter struct{}

func (nopDeadLetter) Publish(context.Context, dlq.Entry) error { return nil }
func (nopDeadLetter) Stored(context.Context, dlq.Entry, time.Time, time.Time) (dlq.Found, error) {
	return dlq.Found{}, nil
}

// BenchmarkHandle settles a successful read the way a worker does: decode,
// deliver to a no-op sink, ack, metrics, with the production JSON logger at
// info writing nowhere. It excludes the client's metadata parsing (the fake
// returns fixed metadata) and the settlement's network cost.
func BenchmarkHandle(b *testing.B) {
	c, err := New(Options{
		Policy:      retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute},
		Concurrency: 32, AckWait: 30 * time.Second, HandlerTimeout: 6 * time.Second, ShutdownTimeout: 30 * time.Second,
		Sink: boundedNoop{}, SinkTimeout: time.Nanosecond,
		DeadLetter:      nopDeadLetter{},
		Metrics:         NewMetrics(prometheus.NewRegistry()),
		Logger:          slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Rand:            retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	msg := &benchMsg{
		data: []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`),
		md: &jetstream.MsgMetadata{
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
