package stream

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// follow stops pulling once the reads parked reach the pull batch (the
// workers are behind), keeps it stopped while more than half the batch is
// parked, and pulls again once the workers have taken them down to half.
func TestFollowStopsPullingWhileTheWorkersAreBehind(t *testing.T) {
	t.Parallel()
	_, cons := pullerEnv(t, 0)
	c, err := New(Options{
		Policy:         retry.Policy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 3},
		Sink:           downstream.SinkFunc(func(context.Context, meter.Read) error { return nil }),
		DeadLetter:     &fakeDeadLetter{},
		Metrics:        NewMetrics(prometheus.NewRegistry()),
		HandlerTimeout: time.Second, AckWait: 5 * time.Second, Concurrency: 2, PullBatch: 4, ShutdownTimeout: time.Second,
		DeadLetterWindow: 20 * time.Minute, Rand: retry.NewRand(1), DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	})
	require.NoError(t, err)
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
	assert.Never(t, func() bool { return !p.pulling() }, 100*time.Millisecond, time.Millisecond, "three parked of a batch of four: still pulling")
	c.park.add(owned(newFakeMsg(goodRead, 1)))
	require.Eventually(t, func() bool { return !p.pulling() }, 5*time.Second, time.Millisecond, "the batch parked: pulling stops")

	_, ok := c.park.take()
	require.True(t, ok)
	assert.Never(t, p.pulling, 100*time.Millisecond, time.Millisecond, "three parked: more than half the batch, still stopped")
	_, ok = c.park.take()
	require.True(t, ok)
	require.Eventually(t, p.pulling, 5*time.Second, time.Millisecond, "two parked, half the batch: pulling again")
}
