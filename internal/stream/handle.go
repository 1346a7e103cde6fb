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
}

// errStopping: the process is stopping, and the read goes back to the
// server without an answer about it.
var errStopping = fmt.Errorf("%w: the read is handed back", classify.ErrShutdown)

// handle settles one message in exactly one way. graceful ends when a
// graceful stop starts; hard ends when the stop has run out of time.
func (c *Consumer) handle(graceful, hard context.Context, msg jetstream.Msg, s *slot) {
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
	d.rec = c.record(hard, md, d.deadline)
	if dec := d.rec.DeadLetter; dec != nil {
		// This read's fate was decided by an earlier delivery; only its
		// copy is missing. Do not ask the downstream again.
		c.deadLetter(hard, d, dec.Reason, dec.classified())
		return
	}
	attempt, budget := attemptOf(md, d.rec), uint64(c.o.Policy.MaxAttempts)
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
		c.m.deliveryAttempt.Observe(float64(attempt))
		if c.log.Enabled(hard, slog.LevelDebug) {
			c.log.LogAttrs(hard, slog.LevelDebug, "ack", slog.String("subject", msg.Subject()),
				slog.Uint64("stream_seq", md.Sequence.Stream), slog.Uint64("deliveries", md.NumDelivered),
				slog.String("meter_id", read.MeterID))
		}
		return
	case errors.Is(err, errStopping):
		// Not the read's fault: hand it back, uncharged, for another replica.
		c.handBack(msg, md, &d.rec, start, err)
		return
	}
	ce := classify.Of(err)
	c.m.failed(ce)
	switch {
	case ce.Class == classify.Permanent:
		c.deadLetter(hard, d, dlq.ReasonPermanent, ce)
	case c.expired(md):
		c.deadLetter(hard, d, dlq.ReasonExpired, ce)
	case c.o.Policy.Exhausted(attempt):
		c.deadLetter(hard, d, dlq.ReasonExhausted, ce)
	default:
		c.retryLater(hard, d, ce, c.o.Policy.DelayWithFloor(attempt, c.o.Rand, ce.RetryAfter))
	}
}

// callDownstream delivers the read once the breaker lets it through. A
// transient failure while the downstream is failing as a whole (the
// breaker is open, or this call was a probe) is not the read's fault: the
// read waits for the breaker again, kept alive, and is not charged an
// attempt. It returns an error matching errStopping when the graceful stop
// began while the read waited for the breaker, or when the stop's deadline
// cut the call short: neither is an answer about the read or the
// downstream.
func (c *Consumer) callDownstream(graceful, hard context.Context, d *delivery, read meter.Read) error {
	for {
		permit, err := c.acquire(graceful)
		if err != nil {
			return errStopping
		}
		slot, err := c.acquireSlot(graceful)
		if err != nil {
			c.release(permit)
			return errStopping
		}
		// The work of the delivery gets its whole time from here, after any
		// wait for the breaker or for a slot.
		d.deadline = time.Now().Add(c.o.HandlerTimeout)
		err = c.deliver(hard, d, read)
		ce := classify.Of(err)
		if err != nil && hard.Err() != nil {
			c.releaseSlot(slot, ce, true)
			c.release(permit)
			return fmt.Errorf("%w: %w", errStopping, err)
		}
		c.releaseSlot(slot, ce, false)
		if c.breaker == nil {
			return err
		}
		outage := ce != nil && ce.Class == classify.Transient
		c.breaker.Done(permit, outage)
		if !outage || (!permit.Probe() && c.breaker.State() == breaker.Closed) || c.expired(d.md) {
			return err
		}
		c.m.failed(ce)
		if c.log.Enabled(hard, slog.LevelDebug) {
			c.log.LogAttrs(hard, slog.LevelDebug, "held for the breaker", c.attrs(d, ce, 0)...)
		}
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
// wherever it lands, subtracts it from the delivery count. rec is the
// read's record, nil when it was not looked up.
func (c *Consumer) handBack(msg jetstream.Msg, md *jetstream.MsgMetadata, rec *Record, start time.Time, why error) {
	ctx := context.Background() // the stop's own deadline may be over: the record must still be written
	if rec == nil {
		r := c.record(ctx, md, time.Time{})
		rec = &r
	}
	rec.HandBacks++
	_ = c.putRecord(ctx, md, *rec)
	c.settleError("nak", msg.Nak())
	ce := classify.NewTransient(classify.CauseShutdown, why)
	c.m.failed(ce)
	c.m.handBacks.Inc()
	c.m.settled(OutcomeNak, time.Since(start).Seconds())
	attrs := append(c.attrs(&delivery{msg: msg, md: md}, ce, 0), slog.Uint64("hand_backs", rec.HandBacks))
	c.naks.line(ctx, slog.LevelWarn, "handed back", ce.Cause, attrs)
}

// handBackMsg hands back a message that no worker looked at.
func (c *Consumer) handBackMsg(msg jetstream.Msg, why error) {
	md, err := msg.Metadata()
	if err != nil {
		c.settleError("nak", msg.Nak())
		return
	}
	c.handBack(msg, md, nil, time.Now(), why)
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
