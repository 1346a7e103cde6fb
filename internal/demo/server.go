package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ReadsPath is the path the rate engine is served on.
const ReadsPath = "/reads"

// shutdownGrace is added to SlowDelay to bound a graceful shutdown.
const shutdownGrace = 5 * time.Second

// StartRateEngine listens on addr (e.g. "127.0.0.1:0") and serves re on
// ReadsPath until ctx ends, then shuts down gracefully: requests in flight,
// slow ones included, are answered first. url is "http://<host:port>/reads".
// wait blocks until the server has stopped and returns what went wrong, if
// anything; it may be called more than once.
func StartRateEngine(ctx context.Context, re *RateEngine, addr string) (url string, wait func() error, err error) {
	if re == nil {
		return "", nil, fmt.Errorf("%w: rate engine is nil", ErrConfig)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("rate engine: listen on %s: %w", addr, err)
	}

	mux := http.NewServeMux()
	mux.Handle(ReadsPath, re)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(re.opts.Logger.Handler(), slog.LevelWarn),
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	done := make(chan error, 1)
	go func() {
		select {
		case err := <-served: // the listener failed before ctx ended
			done <- fmt.Errorf("rate engine: serve: %w", err)
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), re.opts.SlowDelay+shutdownGrace)
		defer cancel()
		var errs []error
		if err := srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("rate engine: shutdown: %w", err))
			if err := srv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("rate engine: close: %w", err))
			}
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("rate engine: serve: %w", err))
		}
		done <- errors.Join(errs...)
	}()

	return "http://" + ln.Addr().String() + ReadsPath, sync.OnceValue(func() error { return <-done }), nil
}
