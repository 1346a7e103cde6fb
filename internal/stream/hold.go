package stream

import (
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// retries holds NAKed reads in the process until their retry delay is
// over, then NAKs them without a delay, which the server redelivers at
// once. Held reads are kept alive by the keep-alive owner, so AckWait never
// expires under them.
//
// Why not NakWithDelay: every NAK that carries a delay resets the server's
// redelivery timer to 10ms, so under a steady rate of failures (one NAK every
// few milliseconds, or a fleet of replicas NAKing) the timer never fires and
// every expired delay is redelivered in one burst when the NAKs pause: the
// herd the jitter was meant to spread, put back together by the server. A
// plain NAK goes straight onto the redelivery queue, so each read comes back
// when its own delay says, whatever the rest of the fleet is doing. The
// delay is only handed to the server (NakWithDelay) when the process stops.
type retries struct {
	keep  *keepAlive
	onErr func(string, error)
	// gate decides whether a retry that is due may go now; when it may
	// not, the read is held again for the returned time.
	gate func() (bool, time.Duration)
	// naked is told of each retry of the downstream call NAKed when due
	// (recall fetches it back at once); set before the keep-alive owner
	// runs.
	naked func()
}

// hold keeps d until delay has passed, then NAKs it; a retry of the
// downstream call also waits for the gate (a copy retried, gated: false,
// does not). engines: the delay grew with the engine's state, not with
// the read's own failures (see back).
func (r *retries) hold(d *delivery, delay time.Duration, gated, engines bool) {
	if delay <= 0 && !gated {
		r.settle("nak", d.nak())
		return
	}
	w := &waiting{d: d, due: r.keep.now().Add(delay), then: r.nak, ready: ready, engines: engines}
	if gated {
		w.ready, w.then = r.ready, r.nakDue
	}
	r.keep.add(w)
}

// ready asks the gate whether a due retry may go: 0 if it may, else how
// long it is held again (over the retry budget: not charged).
func (r *retries) ready(time.Time) time.Duration {
	if ok, again := r.gate(); !ok {
		return max(again, time.Millisecond)
	}
	return 0
}

// ready lets a due read go at once.
func ready(time.Time) time.Duration { return 0 }

func (r *retries) nak(d *delivery) { r.settle("nak", d.nak()) }

// nakDue NAKs a retry of the downstream call that is due, and says so.
func (r *retries) nakDue(d *delivery) {
	err := d.nak()
	r.settle("nak", err)
	if err == nil && r.naked != nil {
		r.naked()
	}
}

// back makes every held retry whose delay grew with the engine's state
// due within spread of now (drawn uniformly for each, so a replica's
// reads do not come back together), where it was due later than that; it
// returns how many. The engine is back (the breaker closed on answered probes):
// a delay its outage grew (doubling with each credited delivery, up to
// the policy's cap) held reads from their bill after the return; against
// an engine down for 10s, 4 replicas with the production policy billed
// their last read 5.6-9.5s after it in 3 of about 37 runs, a read called 6
// times in the outage's first second waiting out a delay of 14.6s.
// Spread is the policy's base: the delay of a first retry.
func (r *retries) back(spread time.Duration, rnd retry.Source) int {
	now := r.keep.now()
	return r.keep.hasten(func(w *waiting) (time.Time, bool) {
		if !w.engines || !w.due.After(now.Add(spread)) {
			return time.Time{}, false // its own, or due within the spread already
		}
		return now.Add(time.Duration(rnd.Int64N(int64(spread) + 1))), true
	})
}

// release gives every held read back to the server with the rest of its
// delay (NakWithDelay: the retry it was waiting for), for a stop; it
// returns how many.
func (r *retries) release() int {
	held := r.keep.take(func(w *waiting) bool { return w.due != never })
	now := r.keep.now()
	for _, w := range held {
		if rest := w.due.Sub(now); rest > 0 {
			r.settle("nak", w.d.nakAfter(rest))
		} else {
			r.settle("nak", w.d.nak())
		}
	}
	return len(held)
}

func (r *retries) settle(op string, err error) {
	if err != nil && r.onErr != nil {
		r.onErr(op, err)
	}
}
