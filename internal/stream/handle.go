package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/breaker"
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

// delivery is one delivery of a message being handled.
type delivery struct {
	msg   jetstream.Msg
	md    *jetstream.MsgMetadata
	rec   Record
	start time.Time
	// deadline bounds the work of the delivery (the record look-up, the
	// downstream call and the dead-letter copy): start plus the handler
	// timeout, moved on after each wait for the breaker.
	deadline time.Time
	// failures is how often the read failed before the call at hand: its
	// failed deliveries before this one, then every wait for the breaker
	// in this one.
	failures uint64
	// rev is the revision rec was read at (0: none is stored).
	rev uint64
	// known: rec was read (a first delivery's, or a look-up that
	// succeeded), so it may be written.
	known bool
}

// errStopping: the process is stopping, and the read goes back to the
// server without an answer about it.
var errStopping = fmt.Errorf("%w: the read is handed back", classify.ErrShutdown)

// handle settles one message in exactly one way. graceful ends when a
// graceful stop starts; hard ends when the stop has run out of time;
// giveUp ends when the stop's grace is over (a hand-back then no longer
// waits for the records bucket).
func (c *Consumer) handle(graceful, hard, giveUp context.Context, msg jetstream.Msg, s *slot) {
	start := time.Now()
	c.m.inFlight.Inc()
	defer c.m.inFlight.Dec()
	c.keepers.arm(s, msg, start)
	defer c.keepers.disarm(s)
	c.delayer.unpark(msg)

	md, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery: nothing to count attempts by. Hand it back.
		c.log.Error("message without JetStream metadata", slog.String("subject", msg.Subject()), slog.Any("error", err))
		c.settleError("nak", msg.Nak())
		c.m.settled(OutcomeNak, time.Since(start).Seconds())
		return
	}
	d := &delivery{msg: msg, md: md, start: start, deadline: start.Add(c.o.HandlerTimeout)}
	d.rec, d.rev, d.known = c.lookUp(hard, md, d.deadline)
	if dec := d.rec.DeadLetter; dec != nil {
		// This read's fate was decided by an earlier delivery; only its
		// copy is missing. Do not ask the downstream again.
		c.deadLetter(hard, d, dec.Reason, dec.classified())
		return
	}
	attempt, budget := attemptOf(md, d.rec), uint64(c.o.Policy.MaxAttempts)
	// Its charged attempts and its credited sheds are its failures (a
	// hand-back at a stop is none): the weight of this read's evidence
	// about the engine falls with each.
	d.failures = attempt - 1 + d.rec.Sheds
	read, err := meter.Decode(msg.Data())
	switch {
	case err != nil:
		ce := classify.Of(err)
		c.m.failed(ce)
		c.deadLetter(hard, d, dlq.ReasonPermanent, ce)
		return
	case attempt > budget:
		ce := classify.NewTransient(classify.CauseUnsettled, fmt.Errorf(
			"attempt %d (delivery %d) is past the attempt budget of %d: an earlier delivery ended without settling",
			attempt, md.NumDelivered, budget))
		c.m.failed(ce)
		c.deadLetter(hard, d, dlq.ReasonExhausted, ce)
		return
	}

	if attempt == 1 && c.o.Budget != nil {
		c.o.Budget.First()
	}
	err = c.callDownstream(graceful, hard, d, read)
	switch {
	case err == nil:
		c.settleError("ack", msg.Ack())
		c.m.settled(OutcomeAck, time.Since(start).Seconds())
		c.m.aged(OutcomeAck, md, c.serverNow())
		c.m.deliveryAttempt.Observe(float64(attempt))
		if c.log.Enabled(hard, slog.LevelDebug) {
			c.log.LogAttrs(hard, slog.LevelDebug, "ack", slog.String("subject", msg.Subject()),
				slog.Uint64("stream_seq", md.Sequence.Stream), slog.Uint64("deliveries", md.NumDelivered),
				slog.String("meter_id", read.MeterID))
		}
		return
	case errors.Is(err, errStopping):
		// Not the read's fault: hand it back, uncharged, for another replica.
		c.handBack(giveUp, d, err)
		return
	}
	ce := classify.Of(err)
	c.m.failed(ce)
	switch {
	case ce.Class == classify.Permanent:
		c.deadLetter(hard, d, dlq.ReasonPermanent, ce)
	case c.expired(md):
		c.deadLetter(hard, d, dlq.ReasonExpired, ce)
	case c.o.Policy.Exhausted(attempt) && c.view.Down(md.Sequence.Stream) && c.credit(hard, d):
		// The engine serves no one and fails other reads too: the last
		// failure is the outage's, not the read's, though the breaker may
		// not have seen enough fresh reads to open yet. Credited as a shed.
		c.uncharged(hard, d, ce, whyDown, "failed while the engine serves no one: not charged")
		c.retryLater(hard, d, ce, c.o.Policy.DelayWithFloor(md.NumDelivered, c.o.Rand, ce.RetryAfter))
	case c.o.Policy.Exhausted(attempt):
		c.deadLetter(hard, d, dlq.ReasonExhausted, ce)
	case overload(ce.Cause) && c.view.Shedding() && c.credit(hard, d):
		// The engine sheds broadly: the shed is the engine's state, not the
		// read's. Its attempt is credited back (recorded, as a hand-back);
		// its delay grows with its deliveries.
		c.uncharged(hard, d, ce, whyShedding, "shed while the engine sheds broadly: not charged")
		c.retryLater(hard, d, ce, c.o.Policy.DelayWithFloor(md.NumDelivered, c.o.Rand, ce.RetryAfter))
	default:
		c.retryLater(hard, d, ce, c.o.Policy.DelayWithFloor(attempt, c.o.Rand, ce.RetryAfter))
	}
}

// callDownstream delivers the read once the breaker and the limit let it
// through. A transient failure while the downstream is failing as a whole
// (the breaker is not closed, and the call was not a probe of a read that
// failed before, whose failure is evidence about that read) is not the
// read's fault: the read waits for the breaker again, kept alive, and is
// not charged an attempt. It returns an error matching errStopping when the
// graceful stop began while the read waited for the breaker, or when the
// stop's deadline cut the call short: neither is an answer about the read
// or the downstream.
func (c *Consumer) callDownstream(graceful, hard context.Context, d *delivery, read meter.Read) error {
	for {
		fresh := d.failures == 0
		permit, err := c.acquire(graceful, fresh)
		if err != nil {
			return errStopping
		}
		slot, err := c.acquireSlot(graceful, !fresh)
		if err != nil {
			c.release(permit)
			return errStopping
		}
		// The work of the delivery gets its whole time from here, after any
		// wait for the breaker or for a slot.
		began := time.Now()
		d.deadline = began.Add(c.o.HandlerTimeout)
		err = c.deliver(hard, d, read)
		ce := classify.Of(err)
		cut := err != nil && hard.Err() != nil
		fb := c.observe(d, ce, time.Since(began), cut)
		c.releaseSlot(slot, ce, fb, cut)
		if cut {
			c.release(permit)
			return fmt.Errorf("%w: %w", errStopping, err)
		}
		// A shed while the engine answers others is its load (the limit's
		// to judge) or the read's own, not an outage: the breaker does not
		// count it, so a limit that overshoots a capacity in slow start
		// does not open it.
		failed := ce != nil && ce.Class == classify.Transient && !(overload(ce.Cause) && c.view.Serving())
		if !c.breakerDone(permit, failed) || c.expired(d.md) {
			return err
		}
		c.uncharged(hard, d, ce, whyBreaker, "held for the breaker")
	}
}

// breakerDone gives the breaker the call's outcome and reports whether a
// failure is the outage's, not the read's: the breaker is not closed, and
// the call was not a probe of a read that failed before whose failure left
// the round undecided (that one is evidence about the read).
func (c *Consumer) breakerDone(p breaker.Permit, failed bool) bool {
	if c.breaker == nil {
		return false
	}
	c.breaker.Done(p, failed)
	if !failed {
		return false
	}
	st := c.breaker.State()
	return st != breaker.Closed && (!p.Probe() || p.Fresh() || st == breaker.Open)
}

// credit records an attempt that is not charged, before the NAK that
// ends the delivery, so that the next delivery, wherever it lands, does not
// count it. It reports whether the record was written (without a record,
// the attempt is charged: the delivery count alone can only make a read
// look older, never lose it).
func (c *Consumer) credit(ctx context.Context, d *delivery) bool {
	if _, none := c.records.(noRecords); none || !d.known || d.rec.HandBacks+d.rec.Sheds >= MaxHandBacks ||
		dropLost(d.msg, "record") {
		return false
	}
	return c.change(ctx, d, func(r *Record) { r.Sheds++ })
}

// uncharged counts and logs a failure that is not charged to the read.
func (c *Consumer) uncharged(ctx context.Context, d *delivery, ce *classify.Error, why, msg string) {
	d.failures++
	c.m.failed(ce)
	c.m.uncharged.WithLabelValues(why).Inc()
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.LogAttrs(ctx, slog.LevelDebug, msg, c.attrs(d, ce, 0)...)
	}
}

// deliver calls the sink within the delivery's deadline; a panic becomes a
// transient failure of this read. When the sink bounds each call itself
// within the handler timeout, no timer of our own is needed.
func (c *Consumer) deliver(ctx context.Context, d *delivery, read meter.Read) (err error) {
	if !c.sinkBounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.deadline)
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
	return c.o.Sink.Deliver(ctx, read)
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

// retryLater holds the read for delay, then NAKs it for redelivery.
func (c *Consumer) retryLater(ctx context.Context, d *delivery, ce *classify.Error, delay time.Duration) {
	c.hold(d.msg, delay, true)
	c.m.retryDelay.Observe(delay.Seconds())
	c.m.settled(OutcomeNak, time.Since(d.start).Seconds())
	c.naks.line(ctx, slog.LevelWarn, "nak", ce.Cause, c.attrs(d, ce, delay))
}

// hold holds msg for delay, then NAKs it; a retry of the downstream call
// also waits for the retry budget.
func (c *Consumer) hold(msg jetstream.Msg, delay time.Duration, retry bool) {
	c.delayer.hold(msg, delay, retry)
}

// handBack returns a read to the server without charging it an attempt:
// the hand-back is recorded before the NAK, so that its next delivery,
// wherever it lands, subtracts it from the delivery count. A hand-back
// whose record could not be read or written is NAKed all the same (the
// delivery count alone then decides). The record's look-up and write end
// with ctx: the stop's grace. A delivery lost to another replica is left
// alone.
func (c *Consumer) handBack(ctx context.Context, d *delivery, why error) {
	if dropLost(d.msg, "hand_back") {
		return // another replica may hold the read: no record, no NAK
	}
	recorded := c.change(ctx, d, func(r *Record) { r.HandBacks++ })
	c.settleError("nak", d.msg.Nak())
	ce := classify.NewTransient(classify.CauseShutdown, why)
	c.m.failed(ce)
	c.m.handBacks.Inc()
	c.m.settled(OutcomeNak, time.Since(d.start).Seconds())
	attrs := append(c.attrs(d, ce, 0), slog.Uint64("hand_backs", d.rec.HandBacks), slog.Bool("recorded", recorded))
	c.naks.line(ctx, slog.LevelWarn, "handed back", ce.Cause, attrs)
}

// handBackMsg hands back a message that no worker looked at: its record is
// looked up first, within ctx.
func (c *Consumer) handBackMsg(ctx context.Context, msg jetstream.Msg, why error) {
	md, err := msg.Metadata()
	if err != nil {
		c.settleError("nak", msg.Nak())
		return
	}
	d := &delivery{msg: msg, md: md, start: time.Now()}
	d.rec, d.rev, d.known = c.lookUp(ctx, md, time.Time{})
	c.handBack(ctx, d, why)
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
