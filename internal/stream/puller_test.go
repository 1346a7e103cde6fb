package stream

import (
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

// A consume the server ends (the durable deleted under it) is reported on
// unexpected, and the puller is no longer pulling. A pull in flight hears
// of it at once; otherwise the client notices when its heartbeats stop,
// hence the short expiry (Run's is PullExpiry).
func TestPullerReportsAConsumeTheServerEnded(t *testing.T) {
	t.Parallel()
	js, cons := pullerEnv(t, 1)
	handled := make(chan struct{}, 1)
	p := newPuller(cons, func(m jetstream.Msg) { _ = m.Ack(); handled <- struct{}{} }, jetstream.PullExpiry(time.Second))
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
