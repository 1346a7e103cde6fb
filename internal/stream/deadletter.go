package stream

import (
	"context"
	"errors"
	"log/slog"
	"time"

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

// recordDecision writes the decision to dead-letter the read on its
// record, within what is left of the delivery's deadline (so that a read
// waiting in the client buffer behind it cannot outlive the ack wait). A
// decision already on record (another delivery's, perhaps another
// replica's) stays: the situation returned holds the one on record, which
// the copy carries. A decision that could not be written is the copy's all
// the same, guarded by its message id within the duplicate window.
func (c *Consumer) recordDecision(hard context.Context, d *delivery, s situation, v verdict) situation {
	ctx, cancel := c.within(hard, d.deadline)
	defer cancel()
	// The attempts the read spent: those before this delivery, and its
	// call if it made one that was charged (the write counts it).
	d.dl.attempts = d.attempt - 1
	switch {
	case d.charged:
		d.dl.attempts++
	case s.awaiting != nil && !s.called:
		d.dl.attempts = min(d.attempt, s.maxAttempts) // the shed that awaited the verdict was its last
	}
	now, _ := c.server.now() // the server's clock: another replica compares it, as the duplicate window does
	d.dl.at = now
	decided := Decision{Reason: v.reason, Class: v.cause.Class.String(), Cause: v.cause.Cause, Error: v.cause.Error(), At: now}
	write := func(r *Record) {
		if r.DeadLetter == nil {
			dec := decided
			r.DeadLetter = &dec
		}
		// A copy tried before (last): legacy when a version whose copies'
		// message id did not name the read's stream timestamp tried it,
		// so the duplicate window does not guard against a second copy.
		d.dl.last, d.dl.legacy = r.DeadLetter.Last, r.PublishedAt.IsZero() && !r.DeadLetter.Last.IsZero()
		r.DeadLetter.Last = now
	}
	if !c.change(ctx, d, write) {
		r := d.rec.clone()
		write(&r)
		d.rec = r
	}
	s.recorded = d.rec.DeadLetter
	return s
}

// storeCopy stores the dead-letter copy v describes (the decision on
// record), within what is left of the delivery's deadline, and returns the
// situation with whether JetStream confirmed it. A copy tried before may
// have been stored by an attempt whose answer was lost; past the duplicate
// window its message id no longer guards against a second one, so it is
// looked for first.
func (c *Consumer) storeCopy(hard context.Context, d *delivery, s situation, v verdict) situation {
	ctx, cancel := c.within(hard, d.deadline)
	defer cancel()
	msg, md := d.msg, d.md
	entry := dlq.Entry{
		Reason: v.reason, Cause: v.cause.Cause, Err: v.cause,
		Stream: md.Stream, Consumer: md.Consumer, Subject: msg.Subject(),
		Sequence: md.Sequence.Stream, Deliveries: md.NumDelivered, Attempts: d.dl.attempts, PublishedAt: md.Timestamp,
		Header: msg.Headers(), Data: msg.Data(), At: d.dl.at,
	}
	dec := s.recorded
	if dec != nil && !dec.At.IsZero() {
		entry.At = dec.At // the decision's time, the same on every try of the copy
	}
	var err error
	if !d.dl.last.IsZero() && (d.dl.legacy || d.dl.at.Sub(dec.At) > c.o.DeadLetterWindow-clockSkew) {
		d.dl.found, err = c.lookForCopy(ctx, d, entry, dec.At.Add(-clockSkew), d.dl.last.Add(c.o.HandlerTimeout+clockSkew))
	}
	if err == nil && !d.dl.found {
		drv := retry.Driver{Policy: c.o.DeadLetterRetry, Rand: c.o.Rand,
			Transient: func(err error) bool { return !errors.Is(err, dlq.ErrRejected) }}
		err = drv.Do(ctx, func(ctx context.Context) error { return c.o.DeadLetter.Publish(ctx, entry) })
	}
	s.copied, s.copyErr = true, err
	if err != nil {
		s.copyFloor = c.o.Policy.Ceiling(s.deliveries) / 2
	}
	return s
}

// terminate TERMs a read whose dead-letter copy JetStream confirmed.
func (c *Consumer) terminate(ctx context.Context, d *delivery, v verdict) {
	termReason := string(v.reason) // exhausted, expired
	if v.reason == dlq.ReasonPermanent {
		termReason = string(v.cause.Cause)
	}
	c.settleError("term", d.term(termReason))
	c.m.deadLettered(v.reason)
	c.m.settled(OutcomeTerm, c.now().Sub(d.start).Seconds())
	c.m.aged(OutcomeTerm, d.md, c.serverNow())
	c.m.deliveryAttempt.Observe(float64(d.attempt))
	attrs := append(c.attrs(d, v.cause, 0), slog.String("reason", string(v.reason)))
	if d.dl.found {
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
