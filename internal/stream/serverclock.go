package stream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/clock"
)

// ServerClockInterval is how often the server's clock is measured again.
const ServerClockInterval = time.Minute

// serverClock estimates the NATS server's clock, the clock that stamps
// every read (its stream timestamp) and every dead-letter copy, so that a
// read's age and a decision's time are measured on it rather than on this
// machine's wall clock, which may be minutes off or step. It is measured
// as NTP does: the consumer info carries the server's time when it was
// gathered, taken to be the middle of the request's round trip, within
// half of it; in between, it runs on this process's monotonic clock.
// Until a first measurement succeeds, the local wall clock stands in for
// it, with clockSkew as its tolerance.
type serverClock struct {
	clk clock.Clock
	log *slog.Logger
	set func(offset time.Duration) // reports the local clock's offset

	// last is the latest measurement (nil: none yet), read on every
	// settlement without a lock.
	last atomic.Pointer[measurement]

	mu     sync.Mutex    // measurements are stored under it
	offset time.Duration // local wall clock minus the server's, last logged
}

// measurement is one reading of the server's clock.
type measurement struct {
	server time.Time     // the server's clock at mono
	mono   time.Duration // the monotonic clock then
	within time.Duration // half the round trip of the measurement
}

// infoer is the part of a jetstream.Consumer the measurement asks.
type infoer interface {
	Info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// measure asks the server for its time once.
func (s *serverClock) measure(ctx context.Context, cons infoer) {
	t0 := s.clk.Mono()
	info, err := cons.Info(ctx)
	t1 := s.clk.Mono()
	wall := s.clk.Now()
	if err != nil || info.TimeStamp.IsZero() {
		s.log.Debug("server clock not measured", slog.Any("error", err))
		return
	}
	mid, within := t0+(t1-t0)/2, (t1-t0)/2
	offset := wall.Add(-(t1 - mid)).Sub(info.TimeStamp)
	s.mu.Lock()
	first, moved := s.last.Load() == nil, (offset-s.offset).Abs() >= time.Second
	s.last.Store(&measurement{server: info.TimeStamp, mono: mid, within: within})
	if first || moved {
		s.offset = offset
	}
	s.mu.Unlock()
	s.set(offset)
	if first || moved {
		s.log.Info("server clock measured: reads' ages and dead-letter decisions are timed on it",
			slog.Duration("local_minus_server", offset), slog.Duration("within", within))
	}
}

// run measures the server's clock every interval until ctx ends.
func (s *serverClock) run(ctx context.Context, cons infoer, interval time.Duration) {
	every(ctx, interval, func() {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s.measure(mctx, cons)
		cancel()
	})
}

// maxDrift bounds how fast this machine's monotonic clock and the
// server's clock drift apart: 500 ppm, an uncorrected quartz's worst.
const maxDrift = 2000 // 1/maxDrift

// now returns the server's clock now and the tolerance of the estimate:
// half the measurement's round trip, plus the drift since.
func (s *serverClock) now() (time.Time, time.Duration) {
	m := s.last.Load()
	if m == nil {
		return s.clk.Now(), clockSkew
	}
	since := s.clk.Mono() - m.mono
	return m.server.Add(since), m.within + since/maxDrift
}
