package stream

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/meter"
)

// delivery is one delivery of a read, from the moment it is pulled to its
// settlement, and its one owner: it alone acks, NAKs, terminates and keeps
// alive its message, and drops each of them once its lease may have run
// out (an Ack always goes: the engine answered 2xx, the read is billed,
// whoever holds its delivery now; docs/SETTLEMENT.md).
// The workers, the park, the held retries and the keep-alive loop hold
// deliveries, never messages; what becomes of one is decide's to say and
// settle's to carry out.
type delivery struct {
	msg jetstream.Msg
	// leases is the connection's lease keeper (nil: always held) and got
	// when the delivery arrived, on its monotonic clock; dropped is set
	// once its lease was found lost.
	leases  *leases
	got     time.Duration
	dropped atomic.Bool

	md    *jetstream.MsgMetadata
	rec   Record
	read  meter.Read
	start time.Time
	// deadline bounds the work of the delivery (the record look-up, the
	// downstream call and the dead-letter copy): start plus the handler
	// timeout, moved on after each wait for the breaker.
	deadline time.Time
	// failures is how often the read failed before the call at hand: its
	// failed deliveries before this one, then every wait for the breaker
	// in this one.
	failures uint64
	// attempt is the read's charged attempt: the calls charged to it
	// before this delivery, plus one.
	attempt uint64
	// charged: this delivery made a call that failed and is charged to the
	// read, not yet on record; the next write of the record counts it.
	charged bool
	// rev is the revision rec was read at (0: none is stored).
	rev uint64
	// known: rec was read (a first delivery's, or a look-up that
	// succeeded), so it may be written.
	known bool
	// dl is what the dead-letter copy needs from the record's write.
	dl copyState
}

// copyState is what becomes known of a read's dead-letter copy when its
// decision is written to the record: at is when (on the server's clock),
// last when a copy was last tried (zero: never; legacy: by a version whose
// copies' message id did not name the read's stream timestamp), attempts
// the calls the read spent; found: a copy was found stored already.
type copyState struct {
	at, last time.Time
	legacy   bool
	attempts uint64
	found    bool
}

// newDelivery takes msg on, its lease counted from now.
func newDelivery(msg jetstream.Msg, l *leases) *delivery {
	d := &delivery{msg: msg, leases: l}
	if l != nil {
		d.got = l.clk.Mono()
	}
	return d
}

func (d *delivery) ack() error { return d.msg.Ack() }

func (d *delivery) nak() error {
	if err := d.check("nak"); err != nil {
		return err
	}
	return d.msg.Nak()
}

// nakAfter NAKs the delivery with a delay the server waits before it
// redelivers (only at a stop: see retries).
func (d *delivery) nakAfter(delay time.Duration) error {
	if err := d.check("nak"); err != nil {
		return err
	}
	return d.msg.NakWithDelay(delay)
}

func (d *delivery) term(reason string) error {
	if err := d.check("term"); err != nil {
		return err
	}
	return d.msg.TermWithReason(reason)
}

func (d *delivery) inProgress() error {
	if err := d.check("in_progress"); err != nil {
		return err
	}
	return d.msg.InProgress()
}

// lost reports whether the delivery is not held any more (counting and
// logging it the first time): nothing may be written for it, neither a
// record nor a copy. op names what was about to be done.
func (d *delivery) lost(op string) bool { return d.check(op) != nil }

// check reports errLeaseLost when the delivery is not held any more; the
// first time, it counts and logs the drop. An in-progress signal while the
// connection is down is only skipped: the outage may end soon enough.
func (d *delivery) check(op string) error {
	if d.leases == nil {
		return nil
	}
	if d.dropped.Load() {
		return errLeaseLost
	}
	l := d.leases
	ok, outage := l.held(d.got)
	if ok {
		return nil
	}
	if op == "in_progress" && outage < l.lapse {
		return errLeaseLost
	}
	if d.dropped.CompareAndSwap(false, true) {
		l.lost()
		attrs := []slog.Attr{slog.String("subject", d.msg.Subject()), slog.String("op", op),
			slog.Duration("outage", outage), slog.Duration("lapse", l.lapse)}
		if md, err := d.msg.Metadata(); err == nil {
			attrs = append(attrs, slog.Uint64("stream_seq", md.Sequence.Stream), slog.Uint64("deliveries", md.NumDelivered))
		}
		l.log.LogAttrs(context.Background(), slog.LevelWarn,
			"delivery dropped unsettled: the connection was down long enough for its ack wait to run out; the server redelivers it", attrs...)
	}
	return errLeaseLost
}
