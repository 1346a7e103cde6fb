package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/meterline/meter-consumer/internal/breaker"
)

// paused reports whether new reads must be parked: the breaker is open.
func (c *Consumer) paused() bool {
	return c.breaker != nil && c.breaker.State() == breaker.Open
}

// breakerChanged returns a channel closed at the breaker's next transition
// (nil, which never fires, without a breaker).
func (c *Consumer) breakerChanged() <-chan struct{} {
	if c.breaker == nil {
		return nil
	}
	return c.breaker.Changed()
}

// acquire waits for the breaker to let a call through; ctx is the graceful
// stop.
func (c *Consumer) acquire(ctx context.Context) (breaker.Permit, error) {
	if c.breaker == nil {
		return breaker.Permit{}, nil
	}
	return c.breaker.Acquire(ctx)
}

// release gives back a permit whose call was cut short by the stop.
func (c *Consumer) release(p breaker.Permit) {
	if c.breaker != nil {
		c.breaker.Release(p)
	}
}

// followBreaker pauses pulling while the breaker is open and resumes it
// otherwise; reads parked while it was open go to the workers (through
// tokens on unparked: a worker takes one parked read per token) when it
// half-opens, so that they can serve as probes.
func (c *Consumer) followBreaker(ctx context.Context, p *puller, unparked chan<- struct{}) {
	for {
		changed := c.breaker.Changed()
		switch c.breaker.State() {
		case breaker.Open:
			if p.pulling() {
				p.pause(c.o.AckWait / 2)
				c.log.Warn("breaker open: stopped pulling; in-flight reads are held", slog.Int("parked", int(c.delayer.parked.Load())))
			}
		default:
			if !p.pulling() {
				if err := p.resume(); err != nil {
					c.log.Error("resume pulling", slog.Any("error", err))
				}
			}
		tokens:
			for range c.delayer.parked.Load() {
				select {
				case unparked <- struct{}{}:
				case <-ctx.Done():
					return
				case <-changed:
					break tokens
				}
			}
		}
		var retry <-chan time.Time
		if c.breaker.State() != breaker.Open && !p.pulling() {
			retry = time.After(time.Second) // resume failed: try again
		}
		select {
		case <-changed:
		case <-c.delayer.parkCh: // parked after the tokens were counted: count again
		case <-retry:
		case <-ctx.Done():
			return
		}
	}
}
