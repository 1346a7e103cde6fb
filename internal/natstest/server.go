package natstest

import (
	"errors"
	"fmt"
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
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("natstest: server not ready after 10s")
	}
	return s, nil
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
