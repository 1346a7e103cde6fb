package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// PanicError is a panic recovered while delivering a read.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// handle settles one message in exactly one way. run ends when a graceful
// shutdown starts; ctx is cancelled only when it has run out of time.
func (c *Consumer) handle(run, ctx context.Context, msg jetstream.Msg, s *slot) {
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
	attempt := md.NumDelivered
	budget := uint64(c.o.Policy.MaxAttempts)

	if u, ok := c.unstored.take(md.Sequence.Stream); ok {
		// This replica already decided this read's fate; only its dead-letter
		// copy is missing. Do not ask the downstream again.
		c.deadLetter(ctx, msg, md, u.reason, u.ce, start)
		return
	}
	read, err := meter.Decode(msg.Data())
	switch {
	case err != nil:
		ce := classify.Of(err)
		c.m.failed(ce)
		c.deadLetter(ctx, msg, md, dlq.ReasonPermanent, ce, start)
		return
	case attempt > budget:
		ce := classify.NewTransient(classify.CauseUnsettled, fmt.Errorf(
			"delivery %d is past the attempt budget of %d: an earlier delivery ended without settling", attempt, budget))
		c.m.failed(ce)
		c.deadLetter(ctx, msg, md, dlq.ReasonExhausted, ce, start)
		return
	}

	err = c.callDownstream(run, ctx, read, msg, md)
	if errors.Is(err, errBreakerWait) {
		// Shutting down while the breaker holds the read: not its fault.
		c.settleError("nak", msg.Nak())
		c.m.settled(OutcomeNak, time.Since(start).Seconds())
		c.log.LogAttrs(ctx, slog.LevelWarn, "nak", c.attrs(msg, md, classify.NewTransient(classify.CauseShutdown, err), 0)...)
		return
	}
	if err == nil {
		c.settleError("ack", msg.Ack())
		c.m.settled(OutcomeAck, time.Since(start).Seconds())
		c.m.deliveryAttempt.Observe(float64(attempt))
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.LogAttrs(ctx, slog.LevelDebug, "ack", slog.String("subject", msg.Subject()),
				slog.Uint64("stream_seq", md.Sequence.Stream), slog.Uint64("deliveries", attempt),
				slog.String("meter_id", read.MeterID))
		}
		return
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", classify.ErrShutdown, err)
	}
	ce := classify.Of(err)
	c.m.failed(ce)
	switch {
	case ce.Cause == classify.CauseShutdown:
		// Not the read's fault: hand it straight back for another replica.
		c.settleError("nak", msg.Nak())
		c.m.settled(OutcomeNak, time.Since(start).Seconds())
		c.log.LogAttrs(ctx, slog.LevelWarn, "nak", c.attrs(msg, md, ce, 0)...)
	case ce.Class == classify.Permanent:
		c.deadLetter(ctx, msg, md, dlq.ReasonPermanent, ce, start)
	case c.o.Policy.Exhausted(attempt):
		c.deadLetter(ctx, msg, md, dlq.ReasonExhausted, ce, start)
	default:
		c.retryLater(ctx, msg, md, ce, c.o.Policy.DelayWithFloor(attempt, c.o.Rand, ce.RetryAfter), start)
	}
}

var errBreakerWait = errors.New("shutting down while the breaker holds the read")

// callDownstream delivers the read once the breaker lets it through. A
// transient failure while the downstream is failing as a whole (the
// breaker is open, or this call was a probe) is not the read's fault: the
// read waits for the breaker again, kept alive, and is not charged an
// attempt.
func (c *Consumer) callDownstream(run, ctx context.Context, read meter.Read, msg jetstream.Msg, md *jetstream.MsgMetadata) error {
	for {
		permit, err := c.acquire(run)
		if err != nil {
			return errBreakerWait
		}
		err = c.deliver(ctx, read)
		if c.breaker == nil {
			return err
		}
		ce := classify.Of(err)
		outage := ce != nil && ce.Class == classify.Transient && ce.Cause != classify.CauseShutdown && ctx.Err() == nil
		c.breaker.Done(permit, outage)
		if !outage || (!permit.Probe() && c.breaker.State() == breaker.Closed) {
			return err
		}
		c.m.failed(ce)
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.LogAttrs(ctx, slog.LevelDebug, "held for the breaker", c.attrs(msg, md, ce, 0)...)
		}
	}
}

// deliver calls the sink under the handler timeout; a panic becomes a
// transient failure of this read.
func (c *Consumer) deliver(ctx context.Context, read meter.Read) (err error) {
	if !c.sinkBounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.HandlerTimeout)
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
	return c.o.Sink.Deliver(ctx, read)
}

// retryLater holds the read for delay, then NAKs it for redelivery.
func (c *Consumer) retryLater(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, ce *classify.Error, delay time.Duration, start time.Time) {
	c.hold(msg, delay)
	c.m.retryDelay.Observe(delay.Seconds())
	c.m.settled(OutcomeNak, time.Since(start).Seconds())
	c.log.LogAttrs(ctx, slog.LevelWarn, "nak", c.attrs(msg, md, ce, delay)...)
}

func (c *Consumer) hold(msg jetstream.Msg, delay time.Duration) {
	if c.o.ServerSideDelay {
		c.settleError("nak", msg.NakWithDelay(delay))
		return
	}
	c.delayer.hold(msg, delay)
}

// deadLetter stores the copy, then terminates the original. A copy that was
// not confirmed leaves the original unsettled: it is NAKed with a delay so the
// copy is tried again later.
func (c *Consumer) deadLetter(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, reason dlq.Reason, ce *classify.Error, start time.Time) {
	attempt := md.NumDelivered
	entry := dlq.Entry{
		Reason: reason, Cause: ce.Cause, Err: ce,
		Stream: md.Stream, Consumer: md.Consumer, Subject: msg.Subject(),
		Sequence: md.Sequence.Stream, Deliveries: attempt, PublishedAt: md.Timestamp,
		Header: msg.Headers(), Data: msg.Data(),
	}
	d := retry.Driver{Policy: c.o.DeadLetterRetry, Rand: c.o.Rand}
	err := d.Do(ctx, func(ctx context.Context) error { return c.o.DeadLetter.Publish(ctx, entry) })
	if err != nil {
		c.m.dlqErrors.Inc()
		c.unstored.put(md.Sequence.Stream, unstoredCopy{reason: reason, ce: ce})
		delay := c.o.Policy.Delay(min(attempt, uint64(c.o.Policy.MaxAttempts)), c.o.Rand)
		c.hold(msg, delay)
		c.m.retryDelay.Observe(delay.Seconds())
		c.m.settled(OutcomeNak, time.Since(start).Seconds())
		attrs := append(c.attrs(msg, md, ce, delay), slog.String("reason", string(reason)), slog.Any("dlq_error", err))
		c.log.LogAttrs(ctx, slog.LevelError, "dead-letter copy not confirmed; read NAKed, not terminated", attrs...)
		return
	}
	termReason := string(ce.Cause)
	if reason == dlq.ReasonExhausted {
		termReason = string(dlq.ReasonExhausted)
	}
	c.settleError("term", msg.TermWithReason(termReason))
	c.m.deadLettered(reason)
	c.m.settled(OutcomeTerm, time.Since(start).Seconds())
	c.m.deliveryAttempt.Observe(float64(attempt))
	attrs := append(c.attrs(msg, md, ce, 0), slog.String("reason", string(reason)))
	c.log.LogAttrs(ctx, slog.LevelError, "dead-lettered", attrs...)
}

func (c *Consumer) attrs(msg jetstream.Msg, md *jetstream.MsgMetadata, ce *classify.Error, delay time.Duration) []slog.Attr {
	a := []slog.Attr{
		slog.String("subject", msg.Subject()),
		slog.Uint64("stream_seq", md.Sequence.Stream),
		slog.Uint64("deliveries", md.NumDelivered),
		slog.String("class", ce.Class.String()),
		slog.String("cause", string(ce.Cause)),
		slog.String("error", ce.Error()),
	}
	if delay > 0 {
		a = append(a, slog.Duration("delay", delay))
	}
	return a
}
