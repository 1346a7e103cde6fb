package service

import (
	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/stream"
)

// PipelineOptions returns the options of the pipeline (package stream) that
// the configuration decides: the retry policy and the age limit, the
// workers and the pull, the timeouts, the breaker and the retry of a
// dead-letter copy. The packages of the pipeline have no defaults of their
// own for these: Run, the bench and the tests take them from here, so that
// config.Default() is the one place they are written.
//
// The caller adds what the server and the process give: the sink, the
// dead-letterer, the records and the dead-letter window, the metrics, the
// logger, the random source, the limit and the budget ([Controls]), and the
// durable's own AckWait and PullBatch when they differ (see topology.Setup).
func PipelineOptions(cfg config.Config) stream.Options {
	return stream.Options{
		Policy:          cfg.Retry.Policy(),
		MaxReadAge:      cfg.Retry.MaxReadAge,
		Concurrency:     cfg.Consumer.Concurrency,
		PullBatch:       cfg.Consumer.PullBatch,
		HandlerTimeout:  cfg.Consumer.HandlerTimeout,
		AckWait:         cfg.Consumer.AckWait,
		ShutdownTimeout: cfg.Shutdown.Timeout,
		Breaker:         BreakerOptions(cfg.Breaker),
		DeadLetterRetry: cfg.DLQ.PublishRetry(),
	}
}
