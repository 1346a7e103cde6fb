package simengine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is an Engine served over HTTP on loopback, in the manner of
// httptest.Server: on an OS-chosen port, every path, until Close.
type Server struct {
	*Engine
	// URL is the base URL, "http://127.0.0.1:port", with no trailing slash.
	URL string

	srv       *http.Server
	stop      context.CancelFunc
	served    chan error
	transport *http.Transport
	closeOnce sync.Once

	mu      sync.Mutex // guards closing and active
	closing bool
	active  int
	idle    sync.Cond // signalled when active drops to 0
}

// NewServer starts serving e on 127.0.0.1 (or [::1]) at an OS-chosen port.
// Like httptest.NewServer it panics if it cannot listen: that is a broken
// machine, not a case a test handles.
func NewServer(e *Engine) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("simengine: listen on loopback: %v", err))
		}
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{
		Engine: e,
		URL:    "http://" + ln.Addr().String(),
		srv: &http.Server{
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return base },
		},
		stop:      stop,
		served:    make(chan error, 1),
		transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second},
	}
	s.idle.L = &s.mu
	s.srv.Handler = http.HandlerFunc(s.serveHTTP)
	go func() { s.served <- s.srv.Serve(ln) }()
	return s
}

// serveHTTP serves one request, counted so that Close can wait for it.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		writeBody(w, http.StatusServiceUnavailable, bodyCancelled)
		return
	}
	s.active++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.active--; s.active == 0 {
			s.idle.Broadcast()
		}
		s.mu.Unlock()
	}()
	s.Engine.ServeHTTP(w, r)
}

// Client returns a client for the server whose idle connections Close
// closes. It follows redirects as http.DefaultClient does.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: s.transport}
}

// Close stops the server as a crash would: it closes every connection, and
// the calls still waiting or being served end at once, unbilled (Left,
// Abandoned); their clients see the connection close. It returns once every
// handler has, and may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true // no request enters the engine from now on
		s.mu.Unlock()
		s.stop() // every request's context ends: handlers return promptly
		_ = s.srv.Close()
		<-s.served // http.ErrServerClosed
		s.mu.Lock()
		for s.active > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		s.transport.CloseIdleConnections()
	})
}
