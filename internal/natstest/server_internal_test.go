package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server whose cluster port another listener holds never gets ready:
// Serve says the route listener is missing (the client listener may be
// too, that soon), not only that the server is slow.
func TestServeNamesTheListenerThatIsNotUp(t *testing.T) {
	wait := readyWait
	readyWait = 200 * time.Millisecond
	t.Cleanup(func() { readyWait = wait })
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	o := Options(t.TempDir())
	o.ServerName = "n"
	port := taken.Addr().(*net.TCPAddr).Port
	o.Cluster = server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: port}

	s, err := Serve(o)
	assert.Nil(t, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "natstest: server not ready after 200ms: no ")
	assert.Contains(t, err.Error(), fmt.Sprintf("route (port %d: taken since it was chosen?)", port))
}
