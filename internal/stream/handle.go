package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
)

// PanicError is a panic recovered while delivering a read.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// errStopping: the process is stopping, and the read goes back to the
// server without an answer about it.
var errStopping = fmt.Errorf("%w: the read is handed back", classify.ErrShutdown)

// handle settles one delivery in exactly one way: decide gives its fate,
// from what is known of it, and handle carries it out; the steps that learn
// something (the call, the dead-letter decision written to the record, the
// copy) are followed by decide once more, and the last fate is settle's.
// Each step runs within the run's lifetimes (see lifetimes): a wait for the
// breaker or the limit ends with the graceful one, the work of the
// delivery with the hard one, a hand-back with giveUp.
func (c *Consumer) handle(life lifetimes, d *delivery, w *watch) {
	graceful, hard, giveUp := life.graceful, life.hard, life.giveUp
	start := c.now()
	c.m.inFlight.Inc()
	defer c.m.inFlight.Dec()
	c.keep.arm(w, d, start)
	defer c.keep.disarm(w)
	c.park.remove(d)

	d.start, d.deadline = start, start.Add(c.o.HandlerTimeout)
	s := c.before(hard, d)
	v := decide(s)
	if v.fate == fateCall && s.attempt == 1 {
		c.budget.First()
	}
	for {
		c.account(hard, d, v)
		switch {
		case v.fate.leased() && d.lost(v.fate.String()):
			s.lost = true
		case v.fate == fateCall:
			s = c.call(graceful, hard, d, s)
			v = decide(s)
			d.charged = s.stopped == nil && s.failure != nil && v.uncharged == ""
			continue
		case v.fate == fateDeadLetter:
			s = c.recordDecision(hard, d, s, v)
		case v.fate == fateCopy:
			s = c.storeCopy(hard, d, s, v)
		default:
			c.settle(hard, giveUp, d, v)
			return
		}
		v = decide(s)
	}
}

// account counts what a verdict says of the delivery's failure before it
// is carried out: the failure (once, by the verdict that is the
// delivery's own), a shed credited back, an attempt not charged.
func (c *Consumer) account(ctx context.Context, d *delivery, v verdict) {
	if v.credit {
		c.credit(ctx, d, v)
	}
	if v.own {
		c.m.failed(v.cause)
	}
	if v.uncharged != "" {
		c.uncharged(ctx, d, v)
	}
}

// before is what is known of a delivery before its call: its metadata, its
// record (looked up within its deadline), whether it decodes.
func (c *Consumer) before(ctx context.Context, d *delivery) situation {
	md, err := d.msg.Metadata()
	if err != nil {
		c.log.Error("message without JetStream metadata", slog.String("subject", d.msg.Subject()), slog.Any("error", err))
		return situation{noMetadata: true}
	}
	d.md = md
	d.rec, d.rev, d.known = c.lookUp(ctx, md, d.deadline)
	d.attempt = attemptOf(md, d.rec, c.kept(d))
	s := situation{decided: d.rec.DeadLetter, attempt: d.attempt, deliveries: md.NumDelivered,
		maxAttempts: uint64(c.o.Policy.MaxAttempts), creditable: c.creditable(d)}
	if s.decided != nil {
		return s // its fate is on record: it is not decoded, nor called
	}
	if s.awaiting = d.rec.Awaiting; s.awaiting != nil {
		s.verdict, s.trying = c.view.Verdict(), c.view.Trying()
		s.awaitLeft = c.view.TrialSpan() - c.serverNow().Sub(s.awaiting.At)
	}
	// Its charged calls and its credited sheds are its failures (a
	// delivery that reached no call is none): the weight of this read's
	// evidence about the engine falls with each.
	d.failures = s.attempt - 1 + d.rec.Sheds
	d.read, s.invalid = meter.Decode(d.msg.Data())
	return s
}

// call delivers the read once the breaker and the limit let it through,
// and returns the situation with what the call and the engine's view said.
// When the graceful stop began while the read waited for the breaker or
// the limit, or the stop's deadline cut the call short, the situation says
// it stopped: neither is an answer about the read or the engine.
func (c *Consumer) call(graceful, hard context.Context, d *delivery, s situation) situation {
	s.called, s.failure, s.stopped, s.outage, s.expired, s.down, s.shedding, s.loaded, s.trying = true, nil, nil, false, false, false, false, false, false
	s.awaitLeft = 0
	fresh := d.failures == 0
	permit, err := c.breaker.Acquire(graceful, fresh)
	if err != nil {
		s.stopped = errStopping
		return s
	}
	tok, err := c.limit.Acquire(graceful, !fresh)
	if err != nil {
		c.breaker.Release(permit)
		s.stopped = errStopping
		return s
	}
	// The work of the delivery gets its whole time from here, after any
	// wait for the breaker or for the limit.
	began := c.now()
	d.deadline = began.Add(c.o.HandlerTimeout)
	err = c.deliver(hard, d)
	ce := classify.Of(err)
	cut := err != nil && hard.Err() != nil
	fb := c.observe(d, tok, ce, c.now().Sub(began), cut)
	c.limit.Release(tok, limitSignal(ce, fb, cut))
	if cut {
		c.breaker.Release(permit)
		s.stopped = fmt.Errorf("%w: %w", errStopping, err)
		return s
	}
	s.failure = ce
	s.outage = c.outage(permit, ce)
	if ce != nil && ce.Class == classify.Transient {
		s.expired = c.expired(d.md)
		if s.attempt >= s.maxAttempts {
			s.down = c.view.Down(d.md.Sequence.Stream)
		}
		if overload(ce.Cause) {
			s.shedding = c.view.Shedding()
			s.loaded = s.shedding && c.view.Loaded()
			if s.trying = c.view.Trying(); s.trying {
				s.awaitLeft = c.view.TrialSpan()
			}
		}
	}
	return s
}

// settle carries a verdict out: the one place a read is acked, retried,
// terminated or handed back.
func (c *Consumer) settle(hard, giveUp context.Context, d *delivery, v verdict) {
	switch v.fate {
	case fateAck:
		c.settleError("ack", d.ack())
		c.m.settled(OutcomeAck, c.now().Sub(d.start).Seconds())
		c.m.aged(OutcomeAck, d.md, c.serverNow())
		c.m.deliveryAttempt.Observe(float64(d.attempt))
		if c.log.Enabled(hard, slog.LevelDebug) {
			c.log.LogAttrs(hard, slog.LevelDebug, "ack", slog.String("subject", d.msg.Subject()),
				slog.Uint64("stream_seq", d.md.Sequence.Stream), slog.Uint64("deliveries", d.md.NumDelivered),
				slog.String("meter_id", d.read.MeterID))
		}
	case fateRetry:
		c.countCall(hard, d)
		c.retryLater(hard, d, v)
	case fateTerm:
		c.terminate(hard, d, v)
	case fateHandBack:
		c.handBack(giveUp, d, v.cause)
	case fateReject:
		c.settleError("nak", d.nak())
		c.m.settled(OutcomeNak, c.now().Sub(d.start).Seconds())
	case fateDrop:
		// Counted and logged by the delivery when its lease was found lost.
	}
}

// within is ctx ended by deadline, a time on the consumer's clock (c.now).
func (c *Consumer) within(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, deadline.Sub(c.now()))
}

// kept reports whether the delivery's record counts: records are kept and
// the read's was read. Without it every delivery counts as an attempt.
func (c *Consumer) kept(d *delivery) bool {
	_, none := c.records.(noRecords)
	return !none && d.known
}

// creditable reports whether a failed call may go uncharged: its record
// counts, and the read has been credited fewer than MaxSheds sheds (and an
// earlier version's hand-backs).
func (c *Consumer) creditable(d *delivery) bool {
	return c.kept(d) && d.rec.Sheds+d.rec.HandBacks < MaxSheds
}

// credit records a shed that is not charged, before the NAK that ends the
// delivery: it is not an attempt, but a failure the read's evidence about
// the engine weighs; with the decision it awaits (v.await). A credit that
// could not be written is lost, not charged: the record counts calls, and
// this one is not counted (its next delivery calls again).
func (c *Consumer) credit(ctx context.Context, d *delivery, v verdict) {
	var awaiting *Decision
	if v.await {
		awaiting = &Decision{Reason: dlq.ReasonExhausted, Class: v.cause.Class.String(), Cause: v.cause.Cause, Error: v.cause.Error(),
			At: c.serverNow()} // the server's clock: another replica compares it
	}
	c.change(ctx, d, func(r *Record) { r.Sheds++; r.Awaiting = awaiting })
}

// countCall records the delivery's charged call before its NAK, so that the
// next delivery, wherever it lands, counts it as an attempt. A call that
// could not be recorded (counted and logged by change) is not counted: the
// read may be called once more than its attempts, never lost.
func (c *Consumer) countCall(ctx context.Context, d *delivery) {
	if _, none := c.records.(noRecords); none || !d.charged {
		return
	}
	c.change(ctx, d, func(*Record) {})
}

// unchargedLines are the debug lines of the failures not charged.
var unchargedLines = map[string]string{
	whyBreaker:  "held for the breaker",
	whyDown:     "failed while the engine serves no one: not charged",
	whyShedding: "shed while the engine sheds its load: not charged",
	whyTrial:    "shed at the last attempt while the engine is tried: not charged until the verdict",
}

// uncharged counts and logs a failure that is not charged to the read.
func (c *Consumer) uncharged(ctx context.Context, d *delivery, v verdict) {
	d.failures++
	c.m.uncharged.WithLabelValues(v.uncharged).Inc()
	if c.log.Enabled(ctx, slog.LevelDebug) {
		a := c.attrs(d, v.cause, 0)
		if v.uncharged == whyShedding { // what in the engine's view said the shed was not the read's
			sn := c.view.Snapshot()
			a = append(a, slog.Group("engine", slog.Float64("shed_share", sn.ShedShare), slog.String("verdict", sn.Verdict.String()),
				slog.Float64("background", sn.Background), slog.Bool("trial", sn.Trial), slog.Bool("queued", sn.Queued),
				slog.Bool("overloaded", sn.Overloaded), slog.Duration("latency", sn.Latency), slog.Duration("baseline", sn.Baseline)))
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, unchargedLines[v.uncharged], a...)
	}
}

// SettleReserve is the part of the handler timeout a call may not use: what
// settling the read needs after it (the record of a failed call, the
// decision and the dead-letter copy), so that a call that takes all it may
// still leaves its read settled with its real cause, not "unsettled" at
// its next delivery. A sixth of the handler timeout (1s of the default 6s,
// as the default downstream timeout leaves), at least 100ms, at most half.
func SettleReserve(handlerTimeout time.Duration) time.Duration {
	return min(max(handlerTimeout/6, 100*time.Millisecond), handlerTimeout/2)
}

// deliver calls the sink within the delivery's deadline less SettleReserve;
// a panic becomes a transient failure of this read. When the sink bounds
// each call itself within that (Options.SinkTimeout), no timer of our own
// is needed.
func (c *Consumer) deliver(ctx context.Context, d *delivery) (err error) {
	if !c.sinkBounded {
		var cancel context.CancelFunc
		ctx, cancel = c.within(ctx, d.deadline.Add(-SettleReserve(c.o.HandlerTimeout)))
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			c.m.panics.Inc()
			c.log.Error("panic while delivering a read", slog.Any("panic", v), slog.String("stack", string(pe.Stack)))
			err = classify.NewTransient(classify.CausePanic, pe)
		}
	}()
	if tp := traceParent(d.msg.Headers()); tp != "" {
		ctx = downstream.WithTraceParent(ctx, tp)
	}
	return c.o.Sink.Deliver(ctx, d.read)
}

// traceParent is the W3C traceparent a head-end put on the message, passed
// on to the rate engine so that its trace reaches the bill.
func traceParent(h nats.Header) string {
	if h == nil {
		return ""
	}
	if v := h.Get("traceparent"); v != "" {
		return v
	}
	return h.Get("Traceparent")
}

// retryLater holds the read for its delay, then NAKs it for redelivery; a
// retry of its call also waits for the retry budget (v.gated), a retry of
// its dead-letter copy does not.
func (c *Consumer) retryLater(ctx context.Context, d *delivery, v verdict) {
	p := c.o.Policy
	if v.within > 0 {
		p.Cap = min(p.Cap, v.within)
	}
	delay := p.DelayWithFloor(v.backoff, c.o.Rand, v.floor)
	c.retries.hold(d, delay, v.gated, v.engines())
	c.m.retryDelay.Observe(delay.Seconds())
	c.m.settled(OutcomeNak, c.now().Sub(d.start).Seconds())
	if v.copyErr == nil {
		c.naks.line(ctx, slog.LevelWarn, "nak", v.cause.Cause, c.attrs(d, v.cause, delay))
		return
	}
	c.m.dlqErrors.Inc()
	attrs := append(c.attrs(d, v.cause, delay), slog.String("reason", string(v.reason)), slog.Any("dlq_error", v.copyErr))
	msg := "dead-letter copy not confirmed; read NAKed, not terminated"
	if errors.Is(v.copyErr, dlq.ErrRejected) {
		c.m.dlqRejections.Inc()
		msg = "dead-letter copy rejected by the server; read NAKed, not terminated, until the cause is fixed"
	}
	c.naks.line(ctx, slog.LevelError, msg, v.cause.Cause, attrs)
}

// handBack returns a read to the server without charging it an attempt: it
// made no charged call, and its record counts calls, so nothing needs
// recording before the NAK. A record of an earlier version, which counted
// hand-backs instead, is first rewritten to count calls (within ctx: the
// stop's grace); one that could not be read or written leaves the delivery
// count to decide.
func (c *Consumer) handBack(ctx context.Context, d *delivery, ce *classify.Error) {
	if d.rev > 0 && !d.rec.CountsCalls {
		c.change(ctx, d, func(*Record) {})
	}
	select { // within ctx, until this process no longer pulls
	case <-c.unpulled:
	case <-ctx.Done():
	}
	c.settleError("nak", d.nak())
	c.m.handBacks.Inc()
	c.m.settled(OutcomeNak, c.now().Sub(d.start).Seconds())
	c.naks.line(ctx, slog.LevelWarn, "handed back", ce.Cause, c.attrs(d, ce, 0))
}

// handBackUnhandled hands back a delivery that no worker looked at, as
// decide says of a stop (or drops it, its lease lost): its record is looked
// up first, within ctx, in case an earlier version wrote it.
func (c *Consumer) handBackUnhandled(ctx context.Context, d *delivery, why error) {
	d.start = c.now()
	md, err := d.msg.Metadata()
	if err != nil {
		c.settle(ctx, ctx, d, decide(situation{noMetadata: true}))
		return
	}
	d.md = md
	s := situation{called: true, stopped: why}
	if d.lost(fateHandBack.String()) {
		s.lost = true
	} else {
		d.rec, d.rev, d.known = c.lookUp(ctx, md, time.Time{})
	}
	v := decide(s)
	c.account(ctx, d, v)
	c.settle(ctx, ctx, d, v)
}

func (c *Consumer) attrs(d *delivery, ce *classify.Error, delay time.Duration) []slog.Attr {
	a := []slog.Attr{
		slog.String("subject", d.msg.Subject()),
		slog.Uint64("stream_seq", d.md.Sequence.Stream),
		slog.Uint64("deliveries", d.md.NumDelivered),
		slog.String("class", ce.Class.String()),
		slog.String("cause", string(ce.Cause)),
		slog.String("error", ce.Error()),
	}
	if delay > 0 {
		a = append(a, slog.Duration("delay", delay))
	}
	return a
}
