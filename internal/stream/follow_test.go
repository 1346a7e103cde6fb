package stream

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// follow stops pulling once the reads parked reach the pull batch (the
// workers are behind), keeps it stopped while more than half the batch is
// parked, and pulls again once the workers have taken them down to half.
//
// The puller consumes from a fake durable, so that everything follow waits
// on is made in the synctest bubble: synctest.Wait returns once follow has
// taken in every park and take and is blocked again, and the puller's state
// is then follow's decision, not a moment in a race.
func TestFollowStopsPullingWhileTheWorkersAreBehind(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, err := New(withEngine(t, Options{
			Policy:         retry.Policy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 3},
			Sink:           downstream.SinkFunc(func(context.Context, meter.Read) error { return nil }),
			DeadLetter:     &fakeDeadLetter{},
			Metrics:        NewMetrics(prometheus.NewRegistry()),
			HandlerTimeout: time.Second, AckWait: 5 * time.Second, Concurrency: 2, PullBatch: 4, ShutdownTimeout: time.Second,
			DeadLetterWindow: 20 * time.Minute, Rand: retry.NewRand(1), DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
		}, engine.Options{}, nil))
		require.NoError(t, err)
		cons := &fakeConsumer{}
		p := newPuller(cons, func(jetstream.Msg) {}, jetstream.PullMaxMessages(4))
		require.NoError(t, p.resume())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.follow(ctx, p)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
			p.pause(time.Second)
		})

		for range 3 {
			c.park.add(owned(newFakeMsg(goodRead, 1)))
		}
		synctest.Wait()
		assert.True(t, p.pulling(), "three parked of a batch of four: still pulling")
		c.park.add(owned(newFakeMsg(goodRead, 1)))
		synctest.Wait()
		require.False(t, p.pulling(), "the batch parked: pulling stops")

		_, ok := c.park.take()
		require.True(t, ok)
		synctest.Wait()
		assert.False(t, p.pulling(), "three parked: more than half the batch, still stopped")
		_, ok = c.park.take()
		require.True(t, ok)
		synctest.Wait()
		assert.True(t, p.pulling(), "two parked, half the batch: pulling again")
		assert.Equal(t, 2, cons.consumes(), "one pull at the start, one after the workers caught up")
	})
}

// fakeConsumer is a durable that delivers nothing: Consume returns a
// consume that ends when drained or stopped.
type fakeConsumer struct {
	jetstream.Consumer // any other method panics: follow calls none
	mu                 sync.Mutex
	n                  int
}

func (f *fakeConsumer) Consume(jetstream.MessageHandler, ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return &fakeConsume{closed: make(chan struct{})}, nil
}

func (f *fakeConsumer) consumes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

type fakeConsume struct {
	once   sync.Once
	closed chan struct{}
}

func (f *fakeConsume) Stop()                   { f.once.Do(func() { close(f.closed) }) }
func (f *fakeConsume) Drain()                  { f.Stop() }
func (f *fakeConsume) Closed() <-chan struct{} { return f.closed }
