package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/meter"
)

// fanOutWorkers is the pipeline's default Concurrency.
const fanOutWorkers = 32

// bare is the overhead's baseline: jetstream Consume with a handler that
// only acks, pulling pull messages at a time.
func bare(e *env, pull int) starter {
	return baseline(e, sideBare, "bench-bare", pull, 0, func(m jetstream.Msg) { _ = m.Ack() })
}

// fanOut is the bare loop handing each message to 32 goroutines that only
// ack it: the pipeline's shape without its work. It splits the gap between
// the bare loop and ours into the hand-off and the rest.
func fanOut(e *env, pull int) starter {
	return baseline(e, sideFanOut, "bench-fanout", pull, fanOutWorkers, func(m jetstream.Msg) { _ = m.Ack() })
}

// fanOutDecoding is the fan-out whose goroutines do, before the ack, the
// work no consumer of meter reads can skip: parse the message's JetStream
// metadata and decode the read (meter.Decode). Ours to it is what the
// pipeline costs beyond that work: the records, the breaker, the limit,
// the keep-alive, the metrics and the settlement.
func fanOutDecoding(e *env, pull int) starter {
	return baseline(e, sideFanOutDecode, "bench-fanout-decode", pull, fanOutWorkers, func(m jetstream.Msg) {
		_, merr := m.Metadata()
		_, derr := meter.Decode(m.Data())
		if merr != nil || derr != nil {
			_ = m.Term() // never on the bench's backlog of valid reads
			return
		}
		_ = m.Ack()
	})
}

// baseline starts a variant that consumes on a connection of its own,
// named name, pulling pull messages at a time, and calls handle for each
// in Consume's callback (workers 0) or in workers goroutines; its
// goroutines carry the side label.
func baseline(e *env, side, name string, pull, workers int, handle func(jetstream.Msg)) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, side, func(ctx context.Context) {
			dispatch, after := handle, func() {}
			if workers > 0 {
				dispatch, after = workerPool(workers, handle)
			}
			r, err = consume(ctx, e, name, durable, dispatch, after, jetstream.PullMaxMessages(pull))
		})
		return r, err
	}
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

// workerPool runs n goroutines that each call handle for the messages given to
// dispatch; stop ends them and waits. dispatch is the Consume callback.
func workerPool(n int, handle func(jetstream.Msg)) (dispatch func(jetstream.Msg), stop func()) {
	work, quit := make(chan jetstream.Msg), make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-work:
					handle(m)
				case <-quit:
					return
				}
			}
		}()
	}
	dispatch = func(m jetstream.Msg) {
		select {
		case work <- m:
		case <-quit:
		}
	}
	return dispatch, func() {
		close(quit)
		wg.Wait()
	}
}
