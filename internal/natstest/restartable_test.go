package natstest_test

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// A restarted server answers at the same URL with what it stored, and a
// client that kept its connection is reconnected to it.
func TestARestartedServerKeepsItsPortAndStore(t *testing.T) {
	t.Parallel()
	r := natstest.RunRestartable(t, func(o *server.Options) { o.ServerName = "restartable" })
	assert.NotZero(t, r.Port())
	assert.Equal(t, "nats://"+r.Addr(), r.URL())
	assert.Equal(t, "restartable", r.Server().Name(), "the options were changed")

	nc, err := nats.Connect(r.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	_, err = js.Publish(t.Context(), "s", []byte("kept"))
	require.NoError(t, err)

	r.Shutdown()
	assert.Nil(t, r.Server())
	r.Shutdown() // a second time does nothing
	_, err = net.DialTimeout("tcp", r.Addr(), time.Second)
	require.Error(t, err, "nothing listens while it is shut down")

	r.Restart()
	assert.Equal(t, "restartable", r.Server().Name())
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond, "reconnected at the same URL")
	var msg *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		s, err := js.Stream(t.Context(), "S")
		if err != nil {
			return false
		}
		msg, err = s.GetMsg(t.Context(), 1)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the stream and its message are kept")
	assert.Equal(t, "kept", string(msg.Data))
}
