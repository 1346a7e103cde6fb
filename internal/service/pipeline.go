package service

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// Sink is the rate engine's client a pipeline delivers to: a stream.Sink
// that bounds each call itself (*downstream.HTTP).
type Sink interface {
	downstream.Sink
	Timeout() time.Duration
}

// Parts are what a pipeline is built from beside its configuration: what
// the server gives (the connection, the durable's set-up) and what the
// process injects (the sink, the registry, the logger, the random source).
type Parts struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	// Set is the durable's set-up: its ack wait and pull batch, its
	// records bucket, the dead-letter stream's window and largest copy. A
	// Set.Records without a bucket (KV nil) keeps no records: the pipeline
	// then counts every delivery as an attempt (stream.Options.Records
	// nil), as the bench's pipelines without records do.
	Set      *topology.Setup
	Sink     Sink
	Registry prometheus.Registerer
	Logger   *slog.Logger
	Rand     retry.Source
}

// Pipeline builds the consumer the configuration and the parts say: the
// one wiring of the pipeline, which Run and the bench use. Every setting
// comes from cfg (config.Default() is where defaults are written), every
// part of the server's from p.Set. It returns the adaptive limit too (nil
// when it is off), for a caller that samples it.
func Pipeline(cfg config.Config, p Parts) (*stream.Consumer, *limit.Limiter, error) {
	if cfg.Consumer.HandlerTimeout >= p.Set.AckWait {
		return nil, nil, fmt.Errorf("consumer.handler_timeout (%s) must be shorter than the durable's ack wait (%s): lower it, or raise the durable's ack_wait (%s sets it to consumer.ack_wait)",
			cfg.Consumer.HandlerTimeout, p.Set.AckWait, config.Flag("stream.reconcile"))
	}
	// A pull batch given is checked against the durable's ack wait too, as
	// the configuration's validation checks it against consumer.ack_wait:
	// a read waits in the client buffer for the rounds of those ahead of it.
	if k := cfg.Consumer; k.PullBatch > 0 && k.Concurrency > 0 {
		rounds := (k.PullBatch + k.Concurrency - 1) / k.Concurrency
		if wait := time.Duration(rounds) * k.HandlerTimeout; wait >= p.Set.AckWait {
			return nil, nil, fmt.Errorf("consumer.pull_batch (%d) / consumer.concurrency (%d) rounds of consumer.handler_timeout (%s) = %s must be shorter than the durable's ack wait (%s): a buffered read could be redelivered before a worker takes it; lower pull_batch (0 chooses it) or handler_timeout, or raise the durable's ack_wait (%s sets it to consumer.ack_wait)",
				k.PullBatch, k.Concurrency, k.HandlerTimeout, wait, p.Set.AckWait, config.Flag("stream.reconcile"))
		}
	}
	lim, budg, err := Controls(cfg)
	if err != nil {
		return nil, nil, err
	}
	o := PipelineOptions(cfg)
	o.PullBatch, o.AckWait = p.Set.PullBatch, p.Set.AckWait // the durable's
	o.Sink, o.SinkTimeout = p.Sink, p.Sink.Timeout()
	o.DeadLetter = dlq.NewPublisher(p.JS, dlq.PublisherOptions{Prefix: cfg.DLQ.Prefix, Stream: cfg.DLQ.Stream, Timeout: cfg.DLQ.PublishTimeout(),
		MaxSize: copyLimit(int(p.Conn.MaxPayload()), p.Set.MaxCopySize), Truncate: p.Set.KeepsReads})
	o.DeadLetterWindow = p.Set.DeadLetterWindow
	if p.Set.Records.KV != nil {
		o.Records = p.Set.Records
	}
	o.Metrics, o.Logger, o.Rand = stream.NewMetrics(p.Registry), p.Logger, p.Rand
	o.Limiter, o.Budget, o.Conn = lim, budg, p.Conn
	if err := stream.Engine(&o, engine.Options{}, BreakerOptions(cfg.Breaker)); err != nil {
		return nil, nil, err
	}
	c, err := stream.New(o)
	return c, lim, err
}

// PipelineOptions returns the options of the pipeline (package stream) that
// the configuration decides: the retry policy and the age limit, the
// workers and the pull, the timeouts and the retry of a dead-letter copy
// (the breaker's are BreakerOptions, which Engine builds it from). The
// packages of the pipeline have no defaults of their own for these:
// Pipeline and the stream package's tests take them from here, so that
// config.Default() is the one place they are written.
func PipelineOptions(cfg config.Config) stream.Options {
	return stream.Options{
		Policy:          cfg.Retry.Policy(),
		MaxReadAge:      cfg.Retry.MaxReadAge,
		Concurrency:     cfg.Consumer.Concurrency,
		PullBatch:       cfg.Consumer.PullBatch,
		HandlerTimeout:  cfg.Consumer.HandlerTimeout,
		AckWait:         cfg.Consumer.AckWait,
		ShutdownTimeout: cfg.Shutdown.Timeout,
		DeadLetterRetry: cfg.DLQ.PublishRetry(),
	}
}

// Controls are the adaptive limit and the retry budget the configuration
// asks for (nil: off).
func Controls(cfg config.Config) (*limit.Limiter, *budget.Budget, error) {
	var lim *limit.Limiter
	if cfg.Downstream.Adaptive {
		var err error
		if lim, err = limit.New(limit.Options{Max: cfg.Consumer.Concurrency}); err != nil {
			return nil, nil, err
		}
	}
	if cfg.Retry.BudgetPercent == 0 {
		return lim, nil, nil
	}
	b, err := budget.New(budget.Options{Ratio: float64(cfg.Retry.BudgetPercent) / 100, MinPerSecond: float64(cfg.Retry.BudgetMinPerSecond),
		Window: config.RetryBudgetWindow})
	return lim, b, err
}

// BreakerOptions turns the breaker section into options (nil: disabled).
func BreakerOptions(b config.Breaker) *breaker.Options {
	if !b.Enabled {
		return nil
	}
	return &breaker.Options{
		Window: b.Window, MinCalls: b.MinCalls, FailureRatio: float64(b.FailurePercent) / 100,
		CoolDown: b.CoolDown, MaxCoolDown: b.MaxCoolDown, Probes: b.Probes,
	}
}

// copyLimit is the largest dead-letter copy: the server's max payload, or
// the dead-letter stream's max message size when that is lower.
func copyLimit(maxPayload, streamMax int) int {
	if streamMax > 0 && streamMax < maxPayload {
		return streamMax
	}
	return maxPayload
}
