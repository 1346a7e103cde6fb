package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// subject is where benchmark reads are published.
const subject = "meter.reads.bench"

// env is the control side of a scenario: a connection that creates streams
// and durables, publishes, and watches ack floors.
type env struct {
	url  string
	nc   *nats.Conn
	js   jetstream.JetStream
	topo topology.Topology
}

// productionTopology is the topology of the binary's defaults: AckWait 30s,
// MaxAckPending 10000.
func productionTopology() topology.Topology { return service.Topology(config.Default()) }

func newEnv(url string) (*env, error) {
	nc, err := nats.Connect(url, nats.Name("bench-control"))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &env{url: url, nc: nc, js: js, topo: productionTopology()}, nil
}

func (e *env) close() { e.nc.Close() }

// reset deletes and recreates the source and dead-letter streams, empty.
func (e *env) reset(ctx context.Context) error {
	for _, name := range []string{e.topo.Stream, e.topo.DLQStream} {
		if err := e.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("delete stream %s: %w", name, err)
		}
	}
	// A stream recreated right after its deletion can find its store still
	// being removed ("error creating store for stream"): try again shortly.
	d := retry.Driver{Policy: retry.Policy{Base: 50 * time.Millisecond, Cap: 500 * time.Millisecond, MaxAttempts: 10}}
	for _, cfg := range []jetstream.StreamConfig{e.topo.StreamConfig(), e.topo.DLQStreamConfig()} {
		if err := d.Do(ctx, func(ctx context.Context) error {
			_, err := e.js.CreateStream(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// durable creates a fresh durable with the production consumer settings and
// maxAckPending (0 keeps the production 10000), and an empty records bucket.
func (e *env) durable(ctx context.Context, name string, maxAckPending int) (jetstream.Consumer, error) {
	cfg := e.topo.ConsumerConfig()
	cfg.Durable = name
	if maxAckPending > 0 {
		cfg.MaxAckPending = maxAckPending
	}
	cons, err := e.js.CreateConsumer(ctx, e.topo.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create durable %s: %w", name, err)
	}
	// The stream was recreated and its sequences start again: records of an
	// earlier run would stand for other reads.
	topo := e.topo
	topo.Durable = name
	if err := e.js.DeleteKeyValue(ctx, topo.Bucket()); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("delete records bucket of %s: %w", name, err)
	}
	if _, err := e.js.CreateKeyValue(ctx, topo.RecordsConfig()); err != nil {
		return nil, fmt.Errorf("create records bucket of %s: %w", name, err)
	}
	return cons, nil
}

// drop deletes a durable; a failure only leaves it behind in a store that is
// removed with the server.
func (e *env) drop(ctx context.Context, name string) {
	_ = e.js.DeleteConsumer(ctx, e.topo.Stream, name)
}

// errEnded is returned when a variant stopped consuming before its backlog
// was settled.
var errEnded = errors.New("stopped consuming before the backlog was settled")

// infoTimeout bounds one poll of a durable: an API request that goes
// unanswered (rarely, under load) must not hold a measurement for the
// client's default 5s.
const infoTimeout = 500 * time.Millisecond

// waitAcked polls the durable every `every` until its ack floor reaches
// last, ctx ends, or ended is closed, giving each floor read to seen (when
// set; an error from it ends the wait). It returns the longest time the
// floor did not move: a stalled pull shows up there.
func (e *env) waitAcked(ctx context.Context, cons jetstream.Consumer, last uint64, every time.Duration, ended <-chan struct{}, seen func(floor uint64) error) (time.Duration, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	var floor uint64
	var stall time.Duration
	moved := time.Now()
	for {
		ictx, cancel := context.WithTimeout(ctx, infoTimeout)
		info, err := cons.Info(ictx)
		cancel()
		if err == nil {
			if info.AckFloor.Stream != floor {
				floor, moved = info.AckFloor.Stream, time.Now()
			}
			stall = max(stall, time.Since(moved))
			if seen != nil {
				if err := seen(floor); err != nil {
					return stall, err
				}
			}
			if floor >= last {
				return stall, nil
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return stall, fmt.Errorf("wait for acks: %w (last info error: %w)", ctx.Err(), err)
			}
			return stall, fmt.Errorf("wait for acks (floor %d of %d): %w", floor, last, ctx.Err())
		case <-ended:
			return stall, errEnded
		case <-t.C:
		}
	}
}

// drainConn drains nc, flushing its acks, and waits for it to close.
func drainConn(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("drain: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		nc.Close()
		return errors.New("drain: timed out")
	}
}
