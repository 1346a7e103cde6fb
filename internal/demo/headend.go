package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPublishTimeout bounds one publish round trip when
// HeadEnd.PublishTimeout is zero.
const DefaultPublishTimeout = 2 * time.Second

// InvalidHeader names the fault of a deliberately invalid read.
const InvalidHeader = "Demo-Invalid"

// Limits on a HeadEnd's configuration.
const (
	maxRate   = 100_000
	maxMeters = 1_000_000
)

// HeadEnd publishes simulated meter reads to JetStream at a steady rate.
type HeadEnd struct {
	Publisher jetstream.Publisher
	// Subject is the prefix, e.g. "meter.reads"; reads go to
	// <Subject>.<region>, region one of north, south, east, west.
	Subject string
	// Rate is in reads per second, e.g. 20.
	Rate float64
	// Meters is the number of distinct meters, e.g. 500.
	Meters int
	// InvalidPercent is the share (0-100) of deliberately invalid reads.
	InvalidPercent int
	// Rand drives every choice; only Run uses it while it runs.
	Rand *rand.Rand
	// Now is the clock for read_at (default time.Now).
	Now func() time.Time
	// Logger receives publish failures (default: discarded).
	Logger *slog.Logger
	// PublishTimeout bounds one publish and its ack (default DefaultPublishTimeout).
	PublishTimeout time.Duration

	running atomic.Bool
	valid   atomic.Int64
	invalid atomic.Int64
	failed  atomic.Int64
}

// Run publishes reads until ctx ends, then returns nil. Each publish waits
// for JetStream's ack, up to PublishTimeout, even when ctx ends meanwhile; a
// failed publish is logged and counted, not fatal.
// It returns an error wrapping ErrConfig if h is misconfigured or already
// running.
func (h *HeadEnd) Run(ctx context.Context) error {
	if err := h.validate(); err != nil {
		return err
	}
	if !h.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: head-end is already running", ErrConfig)
	}
	defer h.running.Store(false)

	now := h.Now
	if now == nil {
		now = time.Now
	}
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := h.PublishTimeout
	if timeout <= 0 {
		timeout = DefaultPublishTimeout
	}
	gen := newGenerator(h.Rand, h.Meters, h.InvalidPercent)

	tick := time.NewTicker(interval(h.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if ctx.Err() != nil {
			return nil
		}
		h.publish(ctx, gen.next(now()), timeout, log)
	}
}

// Published returns how many valid and invalid reads JetStream acknowledged.
func (h *HeadEnd) Published() (valid, invalid int64) {
	return h.valid.Load(), h.invalid.Load()
}

// Failed returns how many publishes were not acknowledged.
func (h *HeadEnd) Failed() int64 {
	return h.failed.Load()
}

func (h *HeadEnd) publish(ctx context.Context, r read, timeout time.Duration, log *slog.Logger) {
	msg := nats.NewMsg(h.Subject + "." + r.region)
	msg.Data = r.body
	msg.Header.Set(jetstream.MsgIDHeader, r.msgID)
	if r.invalid != "" {
		msg.Header.Set(InvalidHeader, r.invalid)
	}

	// A publish in flight when ctx ends still waits for its ack (up to
	// timeout), so that the counts match what the stream stored.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	ack, err := h.Publisher.PublishMsg(pctx, msg)
	cancel()
	if err != nil {
		h.failed.Add(1)
		log.Warn("publishing a simulated meter read",
			slog.String("subject", msg.Subject), slog.String("msg_id", r.msgID), slog.Any("error", err))
		return
	}
	if ack != nil && ack.Duplicate {
		log.Debug("simulated meter read was a duplicate", slog.String("msg_id", r.msgID))
	}
	if r.invalid != "" {
		h.invalid.Add(1)
	} else {
		h.valid.Add(1)
	}
}

func (h *HeadEnd) validate() error {
	var errs []error
	if h.Publisher == nil {
		errs = append(errs, errors.New("Publisher is nil"))
	}
	if h.Subject == "" || strings.ContainsAny(h.Subject, " \t\r\n*>") ||
		strings.HasPrefix(h.Subject, ".") || strings.HasSuffix(h.Subject, ".") || strings.Contains(h.Subject, "..") {
		errs = append(errs, fmt.Errorf("Subject %q is not a literal subject prefix", h.Subject))
	}
	if !(h.Rate > 0 && h.Rate <= maxRate) {
		errs = append(errs, fmt.Errorf("Rate %v is not in (0, %d] reads per second", h.Rate, maxRate))
	}
	if h.Meters < 1 || h.Meters > maxMeters {
		errs = append(errs, fmt.Errorf("Meters %d is not in [1, %d]", h.Meters, maxMeters))
	}
	if h.InvalidPercent < 0 || h.InvalidPercent > 100 {
		errs = append(errs, fmt.Errorf("InvalidPercent %d is not in [0, 100]", h.InvalidPercent))
	}
	if h.Rand == nil {
		errs = append(errs, errors.New("Rand is nil"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: head-end: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// interval is the time between reads at rate reads per second.
func interval(rate float64) time.Duration {
	d := time.Duration(math.Round(float64(time.Second) / rate))
	return max(d, time.Microsecond)
}
