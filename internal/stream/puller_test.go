package stream

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// pullerEnv is a stream of n reads and a durable on a real server.
func pullerEnv(t *testing.T, n int) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Run(t))
	ctx := t.Context()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "READS", Subjects: []string{"reads.>"}})
	require.NoError(t, err)
	for range n {
		_, err := js.Publish(ctx, "reads.x", []byte(goodRead))
		require.NoError(t, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "READS", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	require.NoError(t, err)
	return js, cons
}

// Pulls the server ends (the durable deleted under them) are reported on
// unexpected, and the puller is no longer pulling. A pull in flight hears
// of it at once.
func TestPullerReportsAConsumeTheServerEnded(t *testing.T) {
	t.Parallel()
	js, cons := pullerEnv(t, 1)
	handled := make(chan struct{}, 1)
	p := newPuller(cons, func(m jetstream.Msg) { _ = m.Ack(); handled <- struct{}{} }, 1, time.Second, nil)
	require.NoError(t, p.resume())
	<-handled // the consume is running: its pulls reach the durable
	require.NoError(t, js.DeleteConsumer(t.Context(), "READS", "d"))
	select {
	case <-p.unexpected:
	case <-time.After(20 * time.Second):
		t.Fatal("the end of the consume was not reported")
	}
	assert.False(t, p.pulling())
}

// Pausing loses nothing: the pull in flight ends, and every read the
// server sent for it reaches the handler; none is left delivered and
// unhandled, to come back after the ack wait. Paused and resumed many
// times while the server sends, the durable's delivered reads are all
// handled.
func TestPausingLosesNoRead(t *testing.T) {
	t.Parallel()
	const n = 3000
	_, cons := pullerEnv(t, n)
	var mu sync.Mutex
	handled := map[uint64]int{}
	p := newPuller(cons, func(m jetstream.Msg) {
		md, err := m.Metadata()
		require.NoError(t, err)
		mu.Lock()
		handled[md.Sequence.Stream]++
		mu.Unlock()
		time.Sleep(50 * time.Microsecond)
		_ = m.Ack()
	}, 128, time.Second, nil)
	for range 40 {
		require.NoError(t, p.resume())
		time.Sleep(5 * time.Millisecond)
		require.True(t, p.pause(5*time.Second))
	}
	info, err := cons.Info(t.Context())
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, len(handled))
	assert.Equal(t, int(info.Delivered.Stream), len(handled), "every read delivered was handled")
	assert.Zero(t, info.NumAckPending, "nothing left delivered and unhandled")
	for seq, k := range handled {
		assert.Equal(t, 1, k, "seq %d handled %d times", seq, k)
	}
}
