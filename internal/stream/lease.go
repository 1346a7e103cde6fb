package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/internal/clock"
)

// Conn is what the consumer reads of its NATS connection: its status and
// its changes (*nats.Conn implements it).
type Conn interface {
	Status() nats.Status
	StatusChanged(statuses ...nats.Status) chan nats.Status
	RemoveStatusListener(ch chan nats.Status)
}

// errLeaseLost: the delivery may belong to another replica now; it is
// dropped here, not settled.
var errLeaseLost = errors.New("the delivery's lease may have run out while the connection was down: dropped, not settled")

// maxOutages bounds the outages remembered; an older one ended before any
// delivery still held can have arrived (they all arrive within an ack wait
// of being kept alive).
const maxOutages = 64

// leases tells whether this replica still holds a delivery. The server
// gives a read to another replica once the ack wait runs out without an
// ack or an in-progress signal from this one, and it does not match a
// settlement with its delivery: a NAK, TERM or in-progress sent for a
// delivery it gave away settles the other replica's. The signals keeping a
// delivery alive go out every AckWait/2 (or sooner), so an outage of the
// connection of AckWait/4 or more since the delivery arrived may have let
// its ack wait run out (its last signal may have gone out up to AckWait/2
// plus a tick before the outage, and a signal buffered during it arrives
// late); a settlement while the connection is down may arrive late too;
// and a stall of the process (see run) is an outage as well. Such a
// delivery is dropped: nothing more is sent for it, no record is
// written and no copy made; the server redelivers the read (to another
// replica, or to this one) and that delivery settles it. An Ack is always
// sent: the engine answered 2xx, the read is billed, and whichever delivery
// it acks is done.
type leases struct {
	clk   clock.Clock
	lapse time.Duration // an outage this long may have cost a lease
	conn  Conn          // nil: never lost
	log   *slog.Logger
	lost  func() // counts a dropped delivery

	mu        sync.Mutex
	down      bool
	downSince time.Duration
	ticked    time.Duration // the last tick of run (0: none yet)
	outages   []outage      // of at least lapse, oldest first
}

// outage is a stretch of time the connection was down, on the monotonic
// clock.
type outage struct{ from, to time.Duration }

func newLeases(clk clock.Clock, ackWait time.Duration, conn Conn, log *slog.Logger, lost func()) *leases {
	return &leases{clk: clk, lapse: ackWait / 4, conn: conn, log: log, lost: lost}
}

// run follows the connection's status until ctx ends. It also ticks every
// lapse/4: a gap of lapse or more between two ticks is a stall of the
// process (stopped, a virtual machine paused) during which nothing kept
// its deliveries alive, and counts as an outage.
func (l *leases) run(ctx context.Context) {
	if l.conn == nil {
		return
	}
	ch := l.conn.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer l.conn.RemoveStatusListener(ch)
	l.changed(l.conn.Status())
	t := time.NewTicker(max(l.lapse/4, time.Millisecond))
	defer t.Stop()
	l.tick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.tick()
		case s, ok := <-ch:
			if !ok {
				return
			}
			l.changed(s)
		}
	}
}

// tick notes that the process ran; after a stall of lapse or more, the
// stall is recorded as an outage.
func (l *leases) tick() {
	now := l.clk.Mono()
	l.mu.Lock()
	last := l.ticked
	l.ticked = now
	stalled := last > 0 && now-last >= l.lapse
	if stalled {
		l.add(outage{last, now})
	}
	l.mu.Unlock()
	if stalled {
		l.log.Warn("the process stalled: deliveries it held may have gone to another replica", slog.Duration("stall", now-last))
	}
}

// add remembers an outage. Locked.
func (l *leases) add(o outage) {
	l.outages = append(l.outages, o)
	if len(l.outages) > maxOutages {
		l.outages = l.outages[1:]
	}
}

// changed records a status change.
func (l *leases) changed(s nats.Status) {
	now := l.clk.Mono()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case s != nats.CONNECTED && !l.down:
		l.down, l.downSince = true, now
	case s == nats.CONNECTED && l.down:
		l.down = false
		if now-l.downSince >= l.lapse {
			l.add(outage{l.downSince, now})
		}
	}
}

// held reports whether a delivery handed to the workers at got (monotonic)
// is still this replica's: the connection is up, and no outage of lapse or
// longer ended after got. An outage counts whole even when got fell inside
// it: a message handed over while the connection was down arrived before
// it went down. It returns the longest such outage (the current one so
// far, while down).
func (l *leases) held(got time.Duration) (bool, time.Duration) {
	if l.conn == nil {
		return true, 0
	}
	now := l.clk.Mono()
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	for _, o := range l.outages {
		if o.to > got {
			longest = max(longest, o.to-o.from)
		}
	}
	if l.down {
		return false, max(longest, now-l.downSince)
	}
	return longest < l.lapse, longest
}
