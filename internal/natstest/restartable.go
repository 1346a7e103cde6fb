package natstest

import (
	"net"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Restartable is a JetStream server that can be shut down and started
// again on the same port and store, the way clients find a restarted NATS
// node: the OS chooses the port at its first start, every restart asks for
// that port again. Its methods are called from the test's goroutine.
type Restartable struct {
	t      testing.TB
	dir    string
	port   int
	addr   string // host:port, once started
	change []func(*server.Options)
	s      *server.Server // nil while shut down
}

// RunRestartable starts a JetStream server storing under t.TempDir(), on a
// port the OS chooses, with each of change applied to its Options first
// (at every start). It is shut down when the test ends.
func RunRestartable(t testing.TB, change ...func(*server.Options)) *Restartable {
	t.Helper()
	r := &Restartable{t: t, dir: t.TempDir(), port: server.RANDOM_PORT, change: change}
	t.Cleanup(r.Shutdown)
	r.Restart()
	r.port, r.addr = r.s.Addr().(*net.TCPAddr).Port, r.s.Addr().String()
	return r
}

// Restart shuts the server down if it runs and starts it again on the same
// port and store, waiting until it accepts connections.
func (r *Restartable) Restart() {
	r.t.Helper()
	r.Shutdown()
	o := Options(r.dir)
	o.Port = r.port
	for _, f := range r.change {
		f(o)
	}
	s, err := Serve(o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.s = s
}

// Shutdown shuts the server down and waits until it has; it does nothing
// when the server is already shut down.
func (r *Restartable) Shutdown() {
	if r.s == nil {
		return
	}
	r.s.Shutdown()
	r.s.WaitForShutdown()
	r.s = nil
}

// Server is the running server; nil while it is shut down.
func (r *Restartable) Server() *server.Server { return r.s }

// Port is the server's client port, the same across restarts.
func (r *Restartable) Port() int { return r.port }

// Addr is the server's client address, host:port.
func (r *Restartable) Addr() string { return r.addr }

// URL is the server's client URL, the same across restarts.
func (r *Restartable) URL() string { return "nats://" + r.Addr() }
