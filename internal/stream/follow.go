package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/meterline/meter-consumer/internal/breaker"
)

// paused reports whether new reads must be parked: the breaker is open.
func (c *Consumer) paused() bool { return c.breaker.State() == breaker.Open }

// follow pauses pulling while the breaker is open, or while the reads
// parked in the process reach the pull batch (the workers are behind: a
// slow downstream, a low concurrency limit), and resumes it once the breaker
// lets reads through and the parked reads are down to half the pull batch.
// Pausing drains the client buffer into the park, where every read is kept
// alive; workers take parked reads before new ones.
func (c *Consumer) follow(ctx context.Context, p *puller) {
	high := max(c.o.PullBatch, 1)
	low := high / 2
	for {
		changed := c.breaker.Changed()
		parked := c.park.len()
		open := c.paused()
		switch {
		case p.pulling() && (open || parked >= high):
			p.pause(c.o.AckWait / 2)
			if open {
				c.log.Warn("breaker open: stopped pulling; in-flight reads are held", slog.Int("parked", c.park.len()))
			} else {
				c.log.Info("workers behind: stopped pulling until the parked reads are taken", slog.Int("parked", parked))
			}
		case !p.pulling() && !open && parked <= low:
			if err := p.resume(); err != nil {
				c.log.Error("resume pulling", slog.Any("error", err))
			}
		}
		var retry <-chan time.Time
		if !open && parked <= low && !p.pulling() {
			retry = time.After(time.Second) // resume failed: try again
		}
		select {
		case <-changed:
		case <-c.park.parked:
		case <-c.park.taken:
		case <-retry:
		case <-ctx.Done():
			return
		}
	}
}
