package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/limit"
)

// budgetRecheck bounds how long a retry over the budget is held before it
// asks again (drawn from [budgetRecheck/4, budgetRecheck]).
const budgetRecheck = time.Second

// retryGate lets a due retry go when the retry budget has room (always
// without a budget), counting both outcomes; a denied retry is held again,
// kept alive and uncharged. Called by the delayer, under its lock.
//
// The budget is there to keep retries from piling onto an overloaded
// engine. With the adaptive limit on (which already bounds the calls in
// flight, retries included), it is enforced only while the engine sheds or
// times out (within the budget's window): the failures of an engine that
// answers (a 500 for one read) retry freely, within their attempt budget,
// rather than waiting at the budget's floor once first attempts stop. Those
// retries are still counted, so a budget enforced soon after sees them.
func (c *Consumer) retryGate() (bool, time.Duration) {
	b := c.o.Budget
	if b != nil && c.o.Limiter != nil && c.o.Now().Sub(c.o.Limiter.LastShed()) > b.Window() {
		b.Spend()
		b = nil
	}
	if b == nil || b.Allow() {
		c.m.retries.WithLabelValues("spent").Inc()
		return true, 0
	}
	c.m.retries.WithLabelValues("denied").Inc()
	return false, budgetRecheck/4 + time.Duration(c.o.Rand.Int64N(int64(budgetRecheck*3/4)))
}

// acquireSlot waits for a slot under the concurrency limit (at once
// without one); ctx is the graceful stop.
func (c *Consumer) acquireSlot(ctx context.Context) (limit.Token, error) {
	if c.o.Limiter == nil {
		return limit.Token{}, nil
	}
	return c.o.Limiter.Acquire(ctx)
}

// releaseSlot tells the limiter what the call said of the downstream's load.
func (c *Consumer) releaseSlot(t limit.Token, ce *classify.Error, cut bool) {
	if ce != nil && (ce.Cause == classify.CauseHTTP503 || ce.Cause == classify.CauseRateLimited) {
		c.m.rejected.WithLabelValues(string(ce.Cause)).Inc()
	}
	if c.o.Limiter == nil {
		return
	}
	signal, wait := limit.Answered, time.Duration(0)
	switch {
	case cut:
		signal = limit.Ignored
	case ce == nil || ce.Class == classify.Permanent:
	case overload(ce.Cause):
		signal, wait = limit.Overloaded, ce.RetryAfter
	default:
		signal = limit.Ignored
	}
	paused := !c.o.Limiter.Paused().IsZero()
	c.o.Limiter.Release(t, signal, wait)
	if until := c.o.Limiter.Paused(); !paused && !until.IsZero() {
		c.log.Warn("the rate engine asked to wait: calls paused", slog.String("cause", string(ce.Cause)),
			slog.Duration("retry_after", wait), slog.Time("until", until))
	}
}

// overload reports the causes that are signs of the downstream's overload.
func overload(c classify.Cause) bool {
	switch c {
	case classify.CauseHTTP503, classify.CauseRateLimited, classify.CauseTimeout,
		classify.CauseHTTP502, classify.CauseHTTP504, classify.CauseConnection:
		return true
	}
	return false
}

// expired reports a read past its time budget (MaxReadAge, from its stream
// timestamp).
func (c *Consumer) expired(md *jetstream.MsgMetadata) bool {
	return c.o.MaxReadAge > 0 && c.o.Now().Sub(md.Timestamp) > c.o.MaxReadAge
}
