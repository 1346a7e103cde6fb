package bench

import (
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// Server is natstest's in-process JetStream server, storing in a temporary
// directory that Close removes: the bench has no testing.TB to own them.
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
	s, err := natstest.Serve(natstest.Options(dir))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
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
