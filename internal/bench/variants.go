package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// The pprof label that says which side a goroutine works for, so a CPU
// profile splits into the server, the consumers and the rest.
const (
	sideLabel        = "side"
	sideServer       = "server"
	sideConsumer     = "consumer"
	sideBare         = "bare"
	sideFanOut       = "fanout"
	sideFanOutDecode = "fanout-decode"
	sideDownstream   = "downstream"
	sidePublisher    = "publisher"
)

// labelled runs f with the side label; goroutines f starts inherit it.
func labelled(ctx context.Context, side string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(sideLabel, side), f)
}

// running is a variant consuming a durable on its own connection.
type running struct {
	stop  func() error    // stops consuming, flushes settlements, closes the connection
	ended <-chan struct{} // closed when consuming ends, on its own or by stop
}

// starter starts a variant on a durable.
type starter func(ctx context.Context, durable string) (*running, error)

// connect opens a connection and the durable's handle on it.
func connect(ctx context.Context, e *env, name, durable string) (*nats.Conn, jetstream.JetStream, jetstream.Consumer, error) {
	nc, err := nats.Connect(e.url, nats.Name(name))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	cons, err := js.Consumer(ctx, e.topo.Stream, durable)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("durable %s: %w", durable, err)
	}
	return nc, js, cons, nil
}

// pipelineOptions are the binary's options (service.PipelineOptions of
// config.Default()) around sink, without the breaker (the overhead's
// +breaker row adds it), the records, the limit or the budget: real metrics on a fresh registry, a JSON logger
// at info writing nowhere, a 10s stop. pull 0 keeps the default
// (stream.AutoPullBatch).
func pipelineOptions(js jetstream.JetStream, topo topology.Topology, sink boundedSink, pull int) stream.Options {
	o := service.PipelineOptions(config.Default())
	o.Breaker = nil
	o.PullBatch, o.AckWait, o.ShutdownTimeout = pull, topo.AckWait, 10*time.Second
	o.Sink, o.SinkTimeout = sink, sink.Timeout()
	o.DeadLetter = dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: topo.DLQPrefix, Stream: topo.DLQStream, Timeout: config.Default().DLQ.PublishTimeout()})
	o.Metrics = stream.NewMetrics(prometheus.NewRegistry())
	o.Logger = discardLogger()
	return o
}

// discardLogger is the bench's pipelines' logger: JSON at info, as the
// binary logs, writing nowhere.
func discardLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// httpConcurrency is the calls in flight of the HTTP sink and of the bare
// posters compared with it: the binary's consumer.concurrency.
var httpConcurrency = config.Default().Consumer.Concurrency

// httpSink is the binary's HTTP sink posting to url with the binary's
// downstream.timeout and consumer.concurrency.
func httpSink(url string) (*downstream.HTTP, error) {
	cls, err := config.Default().Downstream.Classifier()
	if err != nil {
		return nil, err
	}
	h, err := downstream.NewHTTP(downstream.HTTPOptions{URL: url, Timeout: config.Default().Downstream.Timeout, Classifier: cls, Concurrency: httpConcurrency})
	if err != nil {
		return nil, fmt.Errorf("http sink: %w", err)
	}
	return h, nil
}

// boundedSink is a sink that bounds each of its calls itself, as the
// production HTTP sink does: the pipeline is told so (SinkTimeout) and
// adds no timeout of its own, exactly as in production.
type boundedSink interface {
	downstream.Sink
	Timeout() time.Duration
}

// noop is the sink of the overhead scenario: the product's own no-op sink.
var noop boundedSink = downstream.Discard{}

// ours starts one consumer (stream.New + Run) on its own connection on the
// durable; build returns its options. A sink with CloseIdle has its idle
// connections closed when the consumer stops.
func ours(e *env, build func(js jetstream.JetStream) (stream.Options, error)) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, sideConsumer, func(ctx context.Context) {
			r, err = startOne(ctx, e, durable, "bench-ours", func(_ *nats.Conn, js jetstream.JetStream) (*stream.Consumer, func(), error) {
				o, err := build(js)
				if err != nil {
					return nil, nil, err
				}
				closeIdle := func() {}
				if idle, ok := o.Sink.(interface{ CloseIdle() }); ok {
					closeIdle = idle.CloseIdle
				}
				c, err := stream.New(o)
				return c, closeIdle, err
			})
		})
		return r, err
	}
}

// startOne connects as name, builds a consumer with build and runs it on
// durable; build's cleanup runs once the consumer has stopped.
func startOne(ctx context.Context, e *env, durable, name string,
	build func(nc *nats.Conn, js jetstream.JetStream) (c *stream.Consumer, cleanup func(), err error)) (*running, error) {
	nc, js, cons, err := connect(ctx, e, name, durable)
	if err != nil {
		return nil, err
	}
	c, cleanup, err := build(nc, js)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		done <- c.Run(runCtx, cons)
		close(ended)
	}()
	var once sync.Once
	var stopErr error
	return &running{ended: ended, stop: func() error {
		once.Do(func() {
			cancel()
			stopErr = errors.Join(<-done, drainConn(nc, 10*time.Second))
			cleanup()
		})
		return stopErr
	}}, nil
}

// stopAll joins several running variants into one: it ends when any ends.
func stopAll(rs []*running) *running {
	if len(rs) == 1 {
		return rs[0]
	}
	ended := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	quit := make(chan struct{})
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-r.ended:
				once.Do(func() { close(ended) })
			case <-quit:
			}
		}()
	}
	var stopOnce sync.Once
	var stopErr error
	return &running{ended: ended, stop: func() error {
		stopOnce.Do(func() {
			// Every one at once: a fleet stops together, and a stop may
			// wait for calls in flight.
			errs := make([]error, len(rs))
			var stops sync.WaitGroup
			for i, r := range rs {
				stops.Go(func() { errs[i] = r.stop() })
			}
			stops.Wait()
			close(quit)
			wg.Wait()
			stopErr = errors.Join(errs...)
		})
		return stopErr
	}}
}
