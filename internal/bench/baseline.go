package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/meter"
)

// fanOutWorkers is the pipeline's default Concurrency.
const fanOutWorkers = 32

// bare starts the baseline: jetstream Consume with a handler that only
// acks, pulling pull messages at a time.
func bare(e *env, pull int) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, sideBare, func(ctx context.Context) {
			var nc *nats.Conn
			var cons jetstream.Consumer
			nc, _, cons, err = connect(ctx, e, "bench-bare", durable)
			if err != nil {
				return
			}
			r, err = consume(nc, cons, func(m jetstream.Msg) { _ = m.Ack() }, nil, jetstream.PullMaxMessages(pull))
		})
		return r, err
	}
}

// fanOut is the bare loop handing each message to 32 goroutines that only
// ack it: the pipeline's shape without its work. It splits the gap between
// the bare loop and ours into the hand-off and the rest.
func fanOut(e *env, pull int) starter {
	return pooled(e, sideFanOut, "bench-fanout", func(_ context.Context, m jetstream.Msg) { _ = m.Ack() },
		jetstream.PullMaxMessages(pull))
}

// fanOutDecoding is the fan-out whose goroutines do, before the ack, the
// work no consumer of meter reads can skip: parse the message's JetStream
// metadata and decode the read (meter.Decode). Ours to it is what the
// pipeline costs beyond that work: the records, the breaker, the limit,
// the keep-alive, the metrics and the settlement.
func fanOutDecoding(e *env, pull int) starter {
	return pooled(e, sideFanOutDecode, "bench-fanout-decode", func(_ context.Context, m jetstream.Msg) {
		_, merr := m.Metadata()
		_, derr := meter.Decode(m.Data())
		if merr != nil || derr != nil {
			_ = m.Term() // never on the bench's backlog of valid reads
			return
		}
		_ = m.Ack()
	}, jetstream.PullMaxMessages(pull))
}

// pooled starts a variant that consumes on a connection of its own, named
// name, handing each message to fanOutWorkers goroutines that call handle;
// its goroutines carry the side label.
func pooled(e *env, side, name string, handle func(ctx context.Context, m jetstream.Msg), opts ...jetstream.PullConsumeOpt) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, side, func(ctx context.Context) {
			nc, _, cons, cerr := connect(ctx, e, name, durable)
			if cerr != nil {
				err = cerr
				return
			}
			dispatch, after := workerPool(fanOutWorkers, func(m jetstream.Msg) { handle(ctx, m) })
			r, err = consume(nc, cons, dispatch, after, opts...)
		})
		return r, err
	}
}

// consume starts cons.Consume with handler and wraps it as consuming does;
// when it cannot start, it calls after (if set) and closes nc.
func consume(nc *nats.Conn, cons jetstream.Consumer, handler jetstream.MessageHandler, after func(), opts ...jetstream.PullConsumeOpt) (*running, error) {
	cc, err := cons.Consume(handler, opts...)
	if err != nil {
		if after != nil {
			after()
		}
		nc.Close()
		return nil, fmt.Errorf("consume: %w", err)
	}
	return consuming(nc, cc, after), nil
}

// consuming wraps a Consume: stop stops it, then calls after (if set) and
// drains the connection.
func consuming(nc *nats.Conn, cc jetstream.ConsumeContext, after func()) *running {
	var once sync.Once
	var stopErr error
	return &running{ended: cc.Closed(), stop: func() error {
		once.Do(func() {
			cc.Stop()
			if after != nil {
				after()
			}
			select {
			case <-cc.Closed():
			case <-time.After(10 * time.Second):
				stopErr = errors.New("consume did not stop in 10s")
			}
			stopErr = errors.Join(stopErr, drainConn(nc, 10*time.Second))
		})
		return stopErr
	}}
}
