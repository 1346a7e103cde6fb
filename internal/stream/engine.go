package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/limit"
)

// The engine's view (package engine) judges the rate engine across many
// reads; three controls act on its judgement: the breaker (the engine
// fails as a whole: stop calling it), the concurrency limit (calls in
// flight follow its capacity) and the retry budget (retries of an
// overloaded engine are a share of first attempts). Each may be turned
// off; a no-op then stands in for it, so that the pipeline never asks
// whether one is there.

// circuit is the breaker (*breaker.Breaker, or closedCircuit).
type circuit interface {
	Acquire(ctx context.Context, fresh bool) (breaker.Permit, error)
	Release(breaker.Permit)
	Done(p breaker.Permit, failed bool)
	State() breaker.State
	Changed() <-chan struct{}
	Stop()
}

// closedCircuit is no breaker: always closed, never changes.
type closedCircuit struct{}

func (closedCircuit) Acquire(context.Context, bool) (breaker.Permit, error) {
	return breaker.Permit{}, nil
}
func (closedCircuit) Release(breaker.Permit)    {}
func (closedCircuit) Done(breaker.Permit, bool) {}
func (closedCircuit) State() breaker.State      { return breaker.Closed }
func (closedCircuit) Changed() <-chan struct{}  { return nil } // never fires
func (closedCircuit) Stop()                     {}

// concurrency is the limit of calls in flight (*limit.Limiter, or
// unlimited: Concurrency alone bounds them).
type concurrency interface {
	Acquire(ctx context.Context, retry bool) (limit.Token, error)
	Release(limit.Token, limit.Signal)
	// Pause holds new calls for d, on the limiter's clock: it returns when
	// the pause ends, and whether it now ends later than before.
	Pause(d time.Duration) (time.Time, bool)
	// Dip holds the calls in flight at half the limit for span, from in
	// from now.
	Dip(in, span time.Duration)
	// EndDip ends the dip under way or pending.
	EndDip()
	// Mark notes the limit; Restore sets it back to the mark.
	Mark()
	Restore()
	// SlowStart lets the limit grow fast again (the engine is back from
	// an outage).
	SlowStart()
}

type unlimited struct{}

func (unlimited) Acquire(context.Context, bool) (limit.Token, error) { return limit.Token{}, nil }
func (unlimited) Release(limit.Token, limit.Signal)                  {}
func (unlimited) Pause(time.Duration) (time.Time, bool)              { return time.Time{}, false }
func (unlimited) Dip(time.Duration, time.Duration)                   {}
func (unlimited) EndDip()                                            {}
func (unlimited) Mark()                                              {}
func (unlimited) Restore()                                           {}
func (unlimited) SlowStart()                                         {}

// retryBudget bounds retries to a share of first attempts (*budget.Budget,
// or unbudgeted: every retry may go).
type retryBudget interface {
	First()
	Spend()
	Allow() bool
}

type unbudgeted struct{}

func (unbudgeted) First()      {}
func (unbudgeted) Spend()      {}
func (unbudgeted) Allow() bool { return true }

// budgetRecheck bounds how long a retry over the retry budget is held
// before it asks again (drawn from [budgetRecheck/4, budgetRecheck]).
const budgetRecheck = time.Second

// retryGate lets a due retry go when the retry budget has room, counting
// both outcomes; a denied retry is held again, kept alive and uncharged.
// Called by the keep-alive owner, under its lock, for a held retry that is due.
//
// The budget is there to keep retries from piling onto an overloaded
// engine, so it binds only while the engine's view judges it overloaded:
// the failures of an engine that serves everyone else (a 503 for one read,
// a 429 for one account) retry freely, within their attempts. Those
// retries are still counted, so a budget enforced soon after sees them.
func (c *Consumer) retryGate() (bool, time.Duration) {
	allowed := true
	if c.view.Overloaded() {
		allowed = c.budget.Allow()
	} else {
		c.budget.Spend()
	}
	if allowed {
		c.m.retries.WithLabelValues("spent").Inc()
		return true, 0
	}
	c.m.retries.WithLabelValues("denied").Inc()
	return false, budgetRecheck/4 + time.Duration(c.o.Rand.Int64N(int64(budgetRecheck*3/4)))
}

// answerOf is what a call's outcome says about the engine.
func answerOf(ce *classify.Error, cut bool) engine.Answer {
	switch {
	case cut:
		return engine.Cut
	case ce == nil:
		return engine.Served
	case ce.Class == classify.Permanent:
		return engine.Refused
	case overload(ce.Cause):
		return engine.Shed
	}
	return engine.Failed
}

// observe tells the engine's view what one call of d's read said (tok is
// its slot: whether it was sent during a dip), and carries out a pause or
// a dip the view asks for.
func (c *Consumer) observe(d *delivery, tok limit.Token, ce *classify.Error, took time.Duration, cut bool) engine.Feedback {
	call := engine.Call{Read: d.md.Sequence.Stream, Failures: d.failures, Latency: took, Answer: answerOf(ce, cut), Low: tok.Low(),
		InFlight: tok.InFlight()}
	if call.Answer == engine.Shed {
		call.RetryAfter = ce.RetryAfter
	}
	if ce != nil && (ce.Cause == classify.CauseHTTP503 || ce.Cause == classify.CauseRateLimited) {
		c.m.rejected.WithLabelValues(string(ce.Cause)).Inc()
	}
	fb := c.view.Observe(call)
	c.m.engine(fb)
	if fb.Trying {
		c.limit.Mark()
	}
	if fb.Restore {
		c.limit.Restore()
	}
	if fb.EndDip {
		c.limit.EndDip()
	}
	if fb.Dip.For > 0 {
		c.limit.Dip(fb.Dip.In, fb.Dip.For)
	}
	if fb.Judged != engine.Undecided {
		sn := c.view.Snapshot()
		c.log.LogAttrs(context.Background(), slog.LevelInfo, "the rate engine's sheds judged", slog.String("verdict", fb.Judged.String()),
			slog.Float64("shed_share", sn.ShedShare), slog.Float64("background", sn.Background))
	}
	if fb.Pause > 0 {
		if until, later := c.limit.Pause(fb.Pause); later {
			c.m.pauses.Inc()
			c.log.Warn("the rate engine throttles broadly: calls paused", slog.String("cause", string(ce.Cause)),
				slog.Duration("retry_after", ce.RetryAfter), slog.Duration("pause", fb.Pause), slog.Time("until", until))
		}
	}
	return fb
}

// limitSignal is what the engine's view made of a call, for the limit.
func limitSignal(ce *classify.Error, fb engine.Feedback, cut bool) limit.Signal {
	switch {
	case cut:
	case ce == nil || ce.Class == classify.Permanent:
		switch {
		case fb.Queued:
			return limit.Queued
		case fb.Hold:
			return limit.Held
		default:
			return limit.Answered
		}
	case fb.Pace:
		return limit.Paced
	case fb.Decrease:
		return limit.Overloaded
	default:
		return limit.Refused
	}
	return limit.Ignored
}

// outage gives the breaker the call's outcome and reports whether a
// failure is the outage's, not the read's: the breaker is not closed, and
// the call was not a probe of a read that failed before whose failure left
// the round undecided (that one is evidence about the read). The breaker
// opens only while the engine's view finds the engine silent (it has
// failed every call for a while, answering none: see New), so quick
// refusals of an engine that serves others never open it.
func (c *Consumer) outage(p breaker.Permit, ce *classify.Error) bool {
	failed := ce != nil && ce.Class == classify.Transient
	c.breaker.Done(p, failed)
	if !failed {
		return false
	}
	st := c.breaker.State()
	return st != breaker.Closed && (!p.Probe() || p.Fresh() || st == breaker.Open)
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

// expired reports a read past its age limit (MaxReadAge, from its stream
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
