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
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
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

// consume connects as name and Consumes the durable with handler: stop
// stops it, then calls after and drains the connection. When it cannot
// start, it calls after.
func consume(ctx context.Context, e *env, name, durable string, handler jetstream.MessageHandler, after func(), opts ...jetstream.PullConsumeOpt) (*running, error) {
	nc, _, cons, err := connect(ctx, e, name, durable)
	if err != nil {
		after()
		return nil, err
	}
	cc, err := cons.Consume(handler, opts...)
	if err != nil {
		after()
		nc.Close()
		return nil, fmt.Errorf("consume: %w", err)
	}
	return &running{ended: cc.Closed(), stop: sync.OnceValue(func() error {
		cc.Stop()
		after()
		var err error
		select {
		case <-cc.Closed():
		case <-time.After(10 * time.Second):
			err = errors.New("consume did not stop in 10s")
		}
		return errors.Join(err, drainConn(nc, 10*time.Second))
	})}, nil
}

// product is a consumer as the binary builds it: service.Pipeline of a
// configuration and its parts, on a connection of its own.
type product struct {
	cfg config.Config
	// url is where its HTTP sink posts; without, its sink is the no-op
	// downstream.Discard, which reports the bound of its calls as the HTTP
	// sink does (the overhead's).
	url string
	// log, when set, receives the consumer's log records (at the levels it
	// enables) instead of the binary's JSON logger at info, writing nowhere.
	log  slog.Handler
	seed uint64 // of its random source
	// records: the consumer keeps its records in the durable's bucket, as
	// the binary does; without, it keeps none.
	records bool
}

// isolatedConfig is the configuration of the overhead's, the storm's and
// the steady's consumers: replicaConfig's, pulling pull reads at a time (0:
// stream.AutoPullBatch), without the breaker (but in the overhead's
// +breaker row), the adaptive limit and the retry budget, so that their
// figures compare with the runs made before those were added. A pull deeper than the ack wait allows at the default
// handler timeout gets the shorter timeout the configuration would derive,
// which the service checks.
func isolatedConfig(pull int, policy retry.Policy) config.Config {
	cfg := replicaConfig(policy)
	cfg.Consumer.PullBatch = pull
	if k := &cfg.Consumer; pull > 0 {
		rounds := time.Duration((pull + k.Concurrency - 1) / k.Concurrency)
		if h := k.AckWait / (rounds + 1); h < k.HandlerTimeout {
			k.HandlerTimeout, cfg.Downstream.Timeout = h, min(cfg.Downstream.Timeout, h*5/6)
		}
	}
	cfg.Breaker.Enabled, cfg.Downstream.Adaptive, cfg.Retry.BudgetPercent = false, false, 0
	return cfg
}

// httpConcurrency is the calls in flight of the HTTP sink and of the bare
// clients compared with it: the binary's consumer.concurrency.
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

// ours starts p's consumer on the durable, named bench-ours.
func ours(e *env, p product) starter {
	return func(ctx context.Context, durable string) (*running, error) {
		c, err := p.start(ctx, e, durable, "bench-ours")
		if err != nil {
			return nil, err
		}
		return c.running, nil
	}
}

// consumer is a product running.
type consumer struct {
	*running
	limiter  *limit.Limiter // nil when downstream.adaptive is off
	registry *prometheus.Registry
}

// start connects as name, looks the durable up as the binary does
// (topology.Lookup of its configuration's topology), builds p's consumer
// with service.Pipeline and runs it on durable.
func (p product) start(ctx context.Context, e *env, durable, name string) (c *consumer, err error) {
	labelled(ctx, sideConsumer, func(ctx context.Context) { c, err = p.startLabelled(ctx, e, durable, name) })
	return c, err
}

func (p product) startLabelled(ctx context.Context, e *env, durable, name string) (_ *consumer, err error) {
	nc, js, _, err := connect(ctx, e, name, durable)
	if err != nil {
		return nil, err
	}
	closeIdle := func() {}
	defer func() {
		if err != nil {
			closeIdle()
			nc.Close()
		}
	}()
	cfg := p.cfg
	cfg.Consumer.Durable = durable
	set, err := topology.Lookup(ctx, js, service.Topology(cfg))
	if err != nil {
		return nil, err
	}
	if !p.records {
		set.Records = stream.KVRecords{}
	}
	var sink service.Sink = downstream.Discard{}
	if p.url != "" {
		h, err := httpSink(p.url)
		if err != nil {
			return nil, err
		}
		sink, closeIdle = h, h.CloseIdle
	}
	// The binary's logger, writing nowhere.
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if p.log != nil {
		logger = slog.New(p.log)
	}
	reg := prometheus.NewRegistry()
	pipe, lim, err := service.Pipeline(cfg, service.Parts{Conn: nc, JS: js, Set: set, Sink: sink, Registry: reg, Logger: logger, Rand: retry.NewRand(p.seed)})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		done <- pipe.Run(runCtx, set.Consumer)
		close(ended)
	}()
	return &consumer{limiter: lim, registry: reg, running: &running{ended: ended, stop: sync.OnceValue(func() error {
		cancel()
		err := errors.Join(<-done, drainConn(nc, 10*time.Second))
		closeIdle()
		return err
	})}}, nil
}

// stopAll joins several running variants into one: it ends when any ends,
// and stops them all at once (a fleet stops together, and a stop may wait
// for calls in flight).
func stopAll(rs []*running) *running {
	if len(rs) == 1 {
		return rs[0]
	}
	ended := make(chan struct{})
	end := sync.OnceFunc(func() { close(ended) })
	for _, r := range rs {
		go func() { // ends with r, at the latest when stopped
			<-r.ended
			end()
		}()
	}
	return &running{ended: ended, stop: sync.OnceValue(func() error {
		errs := make([]error, len(rs))
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() { errs[i] = r.stop() })
		}
		wg.Wait()
		return errors.Join(errs...)
	})}
}
