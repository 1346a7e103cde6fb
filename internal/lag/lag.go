package lag

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/meterline/meter-consumer/internal/retry"
)

// Source is what a reading needs: the durable consumer and the dead-letter stream.
type Source interface {
	ConsumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error)
	DeadLetterInfo(ctx context.Context) (*jetstream.StreamInfo, error)
}

// JetStream reads from a JetStream context by names.
type JetStream struct {
	JS                       jetstream.JetStream
	Stream, Durable, DLQName string
}

// ConsumerInfo reads the durable consumer's info.
func (j JetStream) ConsumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := j.JS.Consumer(ctx, j.Stream, j.Durable)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// DeadLetterInfo reads the dead-letter stream's info.
func (j JetStream) DeadLetterInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	s, err := j.JS.Stream(ctx, j.DLQName)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// Reader refreshes the gauges.
type Reader struct {
	src      Source
	interval time.Duration
	rand     retry.Source
	log      *slog.Logger

	pending, ackPending, redelivered, deadLetters prometheus.Gauge
	errors                                        prometheus.Counter
}

// New registers the gauges on reg.
func New(src Source, reg prometheus.Registerer, interval time.Duration, rnd retry.Source, log *slog.Logger) *Reader {
	f := promauto.With(reg)
	const ns = "meter_consumer"
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{
		src: src, interval: interval, rand: rnd, log: log,
		pending: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pending_messages",
			Help: "Reads in the stream not yet delivered to the durable consumer (its backlog)."}),
		ackPending: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "ack_pending_messages",
			Help: "Reads delivered and not yet settled, including those waiting out a retry delay."}),
		redelivered: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "redelivered_messages",
			Help: "Reads delivered more than once and not yet settled."}),
		deadLetters: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "dead_letter_stream_messages",
			Help: "Reads held in the dead-letter stream."}),
		errors: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lag_read_errors_total",
			Help: "Backlog readings that failed; the gauges keep their last values."}),
	}
}

// Read takes one reading now.
func (r *Reader) Read(ctx context.Context) error {
	ci, err := r.src.ConsumerInfo(ctx)
	if err != nil {
		r.errors.Inc()
		return err
	}
	r.pending.Set(float64(ci.NumPending))
	r.ackPending.Set(float64(ci.NumAckPending))
	r.redelivered.Set(float64(ci.NumRedelivered))
	si, err := r.src.DeadLetterInfo(ctx)
	if err != nil {
		r.errors.Inc()
		return err
	}
	r.deadLetters.Set(float64(si.State.Msgs))
	return nil
}

// Run reads at once, then every jittered interval until ctx ends.
func (r *Reader) Run(ctx context.Context) {
	for {
		rctx, cancel := context.WithTimeout(ctx, max(r.interval/2, time.Second))
		if err := r.Read(rctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reading the backlog", slog.Any("error", err))
		}
		cancel()
		wait := r.interval/2 + time.Duration(r.rand.Int64N(int64(r.interval)+1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
