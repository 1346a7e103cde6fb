package reliability_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// fixedServer starts a single node on a fixed port, so it can be restarted
// where clients expect it.
func fixedServer(t *testing.T, port int, dir string, opts ...func(*server.Options)) *server.Server {
	t.Helper()
	o := natstest.Options(dir)
	o.Port = port
	for _, f := range opts {
		f(o)
	}
	return natstest.Start(t, o)
}

func url(port int) string { return "nats://127.0.0.1:" + strconv.Itoa(port) }
