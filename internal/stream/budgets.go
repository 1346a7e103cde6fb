package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/limit"
)

// budgetRecheck bounds how long a retry over the budget is held before it
// asks again (drawn from [budgetRecheck/4, budgetRecheck]).
const budgetRecheck = time.Second

// retryGate lets a due retry go when the retry budget has room (always
// without a budget), counting both outcomes; a denied retry is held again,
// kept alive and uncharged. Called by the delayer, under its lock, and by
// a worker retrying a read it holds.
//
// The budget is there to keep retries from piling onto an overloaded
// engine, so it binds only while the engine's view judges it overloaded:
// the failures of an engine that serves everyone else (a 503 for one read,
// a 429 for one account) retry freely, within their attempt budget. Those
// retries are still counted, so a budget enforced soon after sees them.
func (c *Consumer) retryGate() (bool, time.Duration) {
	b := c.o.Budget
	if b != nil && !c.view.Overloaded() {
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

// callToken is a call's place under the concurrency limit, and the
// concurrency it was made at: the limit then (the concurrency without one).
type callToken struct {
	limit.Token
	at int
}

// acquireSlot waits for a slot under the concurrency limit (at once
// without one), a retry ahead of first attempts; ctx is the graceful stop.
func (c *Consumer) acquireSlot(ctx context.Context, retry bool) (callToken, error) {
	s := callToken{at: c.o.Concurrency}
	if c.o.Limiter != nil {
		t, err := c.o.Limiter.Acquire(ctx, retry)
		if err != nil {
			return s, err
		}
		s.Token, s.at = t, c.o.Limiter.Limit()
	}
	return s, nil
}

// observe tells the engine's view what one call of d's read said, and
// carries out a pause the view asks for.
func (c *Consumer) observe(d *delivery, s callToken, ce *classify.Error, took time.Duration, cut bool) engine.Feedback {
	call := engine.Call{Read: d.md.Sequence.Stream, Failures: d.failures, Latency: took, InFlight: s.at}
	switch {
	case cut:
		call.Answer = engine.Cut
	case ce == nil:
		call.Answer = engine.Served
	case ce.Class == classify.Permanent:
		call.Answer = engine.Refused
	case overload(ce.Cause):
		call.Answer, call.RetryAfter, call.Quota = engine.Shed, ce.RetryAfter, ce.Cause == classify.CauseRateLimited
	default:
		call.Answer = engine.Failed
	}
	fb := c.view.Observe(call)
	c.m.engine(fb)
	if fb.Pause > 0 && c.o.Limiter != nil {
		until := time.Now().Add(fb.Pause) // with its monotonic reading, as the limiter's clock
		c.o.Limiter.Pause(until)
		c.log.Warn("the rate engine throttles broadly: calls paused", slog.String("cause", string(ce.Cause)),
			slog.Duration("retry_after", ce.RetryAfter), slog.Duration("pause", fb.Pause), slog.Time("until", until))
	}
	return fb
}

// releaseSlot tells the limiter what the engine's view made of the call.
func (c *Consumer) releaseSlot(s callToken, ce *classify.Error, fb engine.Feedback, cut bool) {
	if ce != nil && (ce.Cause == classify.CauseHTTP503 || ce.Cause == classify.CauseRateLimited) {
		c.m.rejected.WithLabelValues(string(ce.Cause)).Inc()
	}
	if c.o.Limiter == nil {
		return
	}
	signal := limit.Ignored
	switch {
	case cut:
	case ce == nil || ce.Class == classify.Permanent:
		switch {
		case fb.Queued:
			signal = limit.Queued
		case !fb.Hold:
			signal = limit.Answered
		}
	case overload(ce.Cause) && fb.Overloaded:
		signal = limit.Overloaded
	}
	c.o.Limiter.Release(s.Token, signal)
}

// overload reports the causes that are sheds: signs of the downstream's
// overload when they are broad.
func overload(c classify.Cause) bool {
	switch c {
	case classify.CauseHTTP503, classify.CauseRateLimited, classify.CauseTimeout,
		classify.CauseHTTP502, classify.CauseHTTP504, classify.CauseConnection:
		return true
	}
	return false
}

// expired reports a read past its time budget (MaxReadAge, from its stream
// timestamp). Its age is measured on the server's clock, the one that
// stamped it, and only past the estimate's tolerance: a skewed local clock
// neither dead-letters a fresh read nor keeps an old one.
func (c *Consumer) expired(md *jetstream.MsgMetadata) bool {
	if c.o.MaxReadAge <= 0 {
		return false
	}
	now, within := c.server.now()
	return now.Sub(md.Timestamp) > c.o.MaxReadAge+within
}
