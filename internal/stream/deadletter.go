package stream

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/retry"
)

// DeadLetterer stores the dead-letter copy of a read; nil error means
// JetStream confirmed it. *dlq.Publisher is the production implementation.
type DeadLetterer interface {
	Publish(ctx context.Context, e dlq.Entry) error
	// Stored looks for a copy of e's read stored between from and to.
	Stored(ctx context.Context, e dlq.Entry, from, to time.Time) (dlq.Found, error)
}

// clockSkew is the margin allowed between this process's clock and the
// server's when a copy is looked for by its time.
const clockSkew = time.Minute

// deadLetter records the decision, stores the copy, then terminates the
// original. All of it fits in what is left of the delivery's deadline (so
// that a read waiting in the client buffer behind it cannot outlive the
// ack wait); a copy that was not confirmed leaves the original unsettled:
// it is held and NAKed with a growing delay, and its next delivery goes
// straight back here. A decision already on record (another delivery's,
// perhaps another replica's) is the one the copy carries.
func (c *Consumer) deadLetter(hard context.Context, d *delivery, reason dlq.Reason, ce *classify.Error) {
	if d.lost("dead_letter") {
		return // another replica may hold the read: no record, no copy, no TERM
	}
	ctx, cancel := context.WithDeadline(hard, d.deadline)
	defer cancel()
	msg, md := d.msg, d.md
	// The attempts the read spent: those before this delivery, and its
	// call if it made one that was charged.
	attempts := d.attempt - 1
	if d.charged {
		attempts++
	}
	now, _ := c.server.now() // the server's clock: another replica compares it, as the duplicate window does
	decided := Decision{Reason: reason, Class: ce.Class.String(), Cause: ce.Cause, Error: ce.Error(), At: now}
	// last is when a copy was last tried; legacy: the decision was recorded
	// by a version whose copies' message id did not name the read's stream
	// timestamp, so the duplicate window does not guard against a second
	// copy of it.
	var last time.Time
	legacy := false
	decide := func(r *Record) {
		if r.DeadLetter == nil {
			dec := decided
			r.DeadLetter = &dec
		}
		last, legacy = r.DeadLetter.Last, r.PublishedAt.IsZero() && !r.DeadLetter.Last.IsZero()
		r.DeadLetter.Last = now
	}
	if !c.change(ctx, d, decide) {
		// Not recorded: the copy is made all the same, guarded by its
		// message id within the duplicate window.
		r := d.rec.clone()
		decide(&r)
		d.rec = r
	}
	dec := d.rec.DeadLetter
	if dec.Reason != reason || dec.Cause != ce.Cause {
		reason, ce = dec.Reason, dec.classified()
	}
	entry := dlq.Entry{
		Reason: reason, Cause: ce.Cause, Err: ce,
		Stream: md.Stream, Consumer: md.Consumer, Subject: msg.Subject(),
		Sequence: md.Sequence.Stream, Deliveries: md.NumDelivered, Attempts: attempts, PublishedAt: md.Timestamp,
		Header: msg.Headers(), Data: msg.Data(),
	}
	// A copy tried before may have been stored by an attempt whose answer
	// was lost; past the duplicate window its message id no longer guards
	// against a second one, so look for it.
	stored := false
	var err error
	if !last.IsZero() && (legacy || now.Sub(dec.At) > c.o.DeadLetterWindow-clockSkew) {
		stored, err = c.lookForCopy(ctx, d, entry, dec.At.Add(-clockSkew), last.Add(c.o.HandlerTimeout+clockSkew))
	}
	if err == nil && !stored {
		drv := retry.Driver{Policy: c.o.DeadLetterRetry, Rand: c.o.Rand,
			Transient: func(err error) bool { return !errors.Is(err, dlq.ErrRejected) }}
		err = drv.Do(ctx, func(ctx context.Context) error { return c.o.DeadLetter.Publish(ctx, entry) })
	}
	if err != nil {
		c.copyFailed(ctx, d, reason, ce, err)
		return
	}
	termReason := string(reason) // exhausted, expired
	if reason == dlq.ReasonPermanent {
		termReason = string(ce.Cause)
	}
	c.settleError("term", d.term(termReason))
	c.m.deadLettered(reason)
	c.m.settled(OutcomeTerm, time.Since(d.start).Seconds())
	c.m.aged(OutcomeTerm, md, c.serverNow())
	c.m.deliveryAttempt.Observe(float64(d.attempt))
	attrs := append(c.attrs(d, ce, 0), slog.String("reason", string(reason)))
	if stored {
		attrs = append(attrs, slog.Bool("copy_found", true))
	}
	c.log.LogAttrs(ctx, slog.LevelError, "dead-lettered", attrs...)
}

// lookForCopy reports whether a copy of the read is stored already. Copies
// of other reads at the same stream sequence (the stream was re-created)
// are counted and logged, and not taken for this read's; a look-up whose
// consumer could not be deleted after use is counted and logged.
func (c *Consumer) lookForCopy(ctx context.Context, d *delivery, e dlq.Entry, from, to time.Time) (bool, error) {
	found, err := c.o.DeadLetter.Stored(ctx, e, from, to)
	if found.Others > 0 {
		c.m.mismatches.WithLabelValues(mismatchCopy).Add(float64(found.Others))
		c.log.Warn("dead-letter copy of another read at this stream sequence ignored: the stream was re-created",
			slog.Uint64("stream_seq", d.md.Sequence.Stream), slog.Time("published_at", d.md.Timestamp), slog.Int("copies", found.Others))
	}
	if found.Cleanup != nil {
		c.m.lookupLeftovers.Inc()
		c.log.Warn("dead-letter look-up consumer not deleted; the server removes it once idle",
			slog.Uint64("stream_seq", d.md.Sequence.Stream), slog.Any("error", found.Cleanup))
	}
	return found.Copy, err
}

// copyFailed holds a read whose copy was not confirmed and NAKs it later,
// with a delay that grows with its deliveries and is never below half its
// ceiling: a copy refused for good (too large, a full or missing stream)
// is retried slowly, never in a tight loop, until a person fixes the cause.
func (c *Consumer) copyFailed(ctx context.Context, d *delivery, reason dlq.Reason, ce *classify.Error, err error) {
	n := d.md.NumDelivered
	delay := c.o.Policy.DelayWithFloor(n, c.o.Rand, c.o.Policy.Ceiling(n)/2)
	c.retries.hold(d, delay, false)
	c.m.dlqErrors.Inc()
	c.m.retryDelay.Observe(delay.Seconds())
	c.m.settled(OutcomeNak, time.Since(d.start).Seconds())
	attrs := append(c.attrs(d, ce, delay), slog.String("reason", string(reason)), slog.Any("dlq_error", err))
	msg := "dead-letter copy not confirmed; read NAKed, not terminated"
	if errors.Is(err, dlq.ErrRejected) {
		c.m.dlqRejections.Inc()
		msg = "dead-letter copy rejected by the server; read NAKed, not terminated, until the cause is fixed"
	}
	c.naks.line(ctx, slog.LevelError, msg, ce.Cause, attrs)
}
