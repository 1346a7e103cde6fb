package bench

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process NATS server with JetStream storing in a temporary
// directory, like natstest's but without a testing.TB.
type Server struct {
	s   *server.Server
	dir string
}

// StartServer starts a loopback JetStream server on an OS-chosen port and
// waits until it accepts connections.
func StartServer() (*Server, error) {
	dir, err := os.MkdirTemp("", "meter-bench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: store dir: %w", err)
	}
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		_ = os.RemoveAll(dir)
		return nil, errors.New("bench: server not ready after 10s")
	}
	return &Server{s: s, dir: dir}, nil
}

// URL is the client URL.
func (s *Server) URL() string { return s.s.ClientURL() }

// Close shuts the server down and removes its store.
func (s *Server) Close() error {
	s.s.Shutdown()
	s.s.WaitForShutdown()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("bench: remove store: %w", err)
	}
	return nil
}
