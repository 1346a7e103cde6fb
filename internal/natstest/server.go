package natstest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options returns server options for a loopback JetStream server on an
// OS-chosen port, storing under dir.
func Options(dir string) *server.Options {
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}
}

// Serve starts a server with opts and waits until it accepts connections;
// the caller shuts it down. Start is Serve for a test.
func Serve(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natstest: new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(readyWait) {
		err := notReady(s, opts)
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	return s, nil
}

// readyWait bounds how long Serve waits for a server's listeners.
var readyWait = 10 * time.Second

// notReady says which listeners of s are not up after readyWait: a client
// listener slow to come on a loaded machine, or a route listener that
// never comes because another listener took its port (a FreePort port,
// free when chosen) before the server bound it. The server says why only
// in its log, which Options turns off, and ReadyForConnections waits out
// its bound either way.
func notReady(s *server.Server, opts *server.Options) error {
	var down []string
	if s.Addr() == nil {
		down = append(down, "client")
	}
	if opts.Cluster.Port > 0 && s.ClusterAddr() == nil {
		down = append(down, fmt.Sprintf("route (port %d: taken since it was chosen?)", opts.Cluster.Port))
	}
	if opts.Gateway.Name != "" && s.GatewayAddr() == nil {
		down = append(down, "gateway")
	}
	if len(down) == 0 {
		down = append(down, "leafnode, websocket or MQTT")
	}
	return fmt.Errorf("natstest: server not ready after %s: no %s listener", readyWait, strings.Join(down, ", "))
}

// Start starts a server with opts and waits until it accepts connections;
// it is shut down when the test ends.
func Start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := Serve(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Run starts a JetStream server storing under t.TempDir().
func Run(t testing.TB) *server.Server {
	t.Helper()
	return Start(t, Options(t.TempDir()))
}

// Connect connects to s and returns the connection and its JetStream
// context; the connection is closed by t.Cleanup.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
