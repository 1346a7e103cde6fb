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

	"github.com/meterline/meter-consumer/internal/simengine"
)

// ReadsPath is the path the rate engine is served on.
const ReadsPath = "/reads"

// shutdownGrace is added to SlowDelay to bound a graceful shutdown.
const shutdownGrace = 5 * time.Second

// overloadEvery is how often the engine says, if it shed calls, how many.
const overloadEvery = 10 * time.Second

// StartRateEngine listens on addr (e.g. "127.0.0.1:0") and serves re on
// ReadsPath until ctx ends, then shuts down gracefully: requests in flight,
// slow and queued ones included, are answered first. url is
// "http://<host:port>/reads". It logs the engine's capacity at the start,
// and a warning for every 10s in which it shed calls.
//
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

	log := re.opts.Logger
	e := re.Engine()
	log.Info("demo rate engine: serving", slog.String("url", "http://"+ln.Addr().String()+ReadsPath),
		slog.Int("servers", re.opts.Servers), slog.Duration("service_time", re.opts.ServiceTime),
		slog.Int("queue", re.opts.Queue), slog.Float64("capacity_per_second", e.Capacity()))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	reporting, stopReporting := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		reportOverload(reporting, e, log)
	}()

	done := make(chan error, 1)
	go func() {
		err := serveUntil(ctx, srv, served, re.opts.SlowDelay+shutdownGrace)
		stopReporting()
		<-reported
		done <- err
	}()

	return "http://" + ln.Addr().String() + ReadsPath, sync.OnceValue(func() error { return <-done }), nil
}

// serveUntil waits for ctx to end, then shuts srv down within grace (closing
// it if that is not enough); it returns what went wrong, if anything.
func serveUntil(ctx context.Context, srv *http.Server, served <-chan error, grace time.Duration) error {
	select {
	case err := <-served: // the listener failed before ctx ended
		return fmt.Errorf("rate engine: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
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
	return errors.Join(errs...)
}

// reportOverload warns, every overloadEvery until ctx ends, of the calls e
// shed in that time, if any: what a newcomer who raises the publish rate past
// the capacity sees.
func reportOverload(ctx context.Context, e *simengine.Engine, log *slog.Logger) {
	tick := time.NewTicker(overloadEvery)
	defer tick.Stop()
	last := e.Stats()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := e.Stats()
		if shed := st.Shed - last.Shed; shed > 0 {
			log.Warn("demo rate engine: overloaded, calls shed",
				slog.Int64("shed", shed), slog.Int64("served", st.Served-last.Served),
				slog.Duration("over", overloadEvery), slog.Float64("capacity_per_second", e.Capacity()),
				slog.Int("max_in_system", st.MaxInSystem))
		}
		last = st
	}
}
