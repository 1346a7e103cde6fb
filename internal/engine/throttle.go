package engine

import "math"

// throttleK is Google's K: the replica sends, at most, K times what the
// engine accepts; past it, it holds calls back locally (see Admit).
const throttleK = 10

// throttleSize is how many requests the throttle judges on.
const throttleSize = 128

// Outcomes of a request, as the throttle keeps them.
const (
	heldBack int8 = iota // held back by the replica, never sent
	refused              // sent, and shed or failed
	accepted             // sent, and answered (2xx, or a permanent answer)
)

// throttle is client-side throttling as the Google SRE book describes it:
// over the last requests (those held back included), the replica holds a
// new one back with probability (requests - K accepts) / (requests + 1).
// An engine that answers at least half of what it is sent is never
// throttled; one that answers nothing gets one request in about 130, so
// that refusals answered at once do not turn into a loop of calls as fast
// as the engine can refuse them; as it answers again, the share sent
// doubles with each turn of the window.
type throttle struct {
	ring              [throttleSize]int8
	head, n           int
	requests, accepts int
}

func (t *throttle) add(o int8) {
	if t.n == len(t.ring) {
		if t.ring[t.head] == accepted {
			t.accepts--
		}
		t.head = (t.head + 1) % len(t.ring)
		t.n--
		t.requests--
	}
	t.ring[(t.head+t.n)%len(t.ring)] = o
	t.n++
	t.requests++
	if o == accepted {
		t.accepts++
	}
}

// reject is the probability a new request is held back: Google's, the
// accepts taken two standard deviations higher than counted, so that a few
// dozen requests failing a little more than half the time by chance (an
// engine failing 40% of its calls, at a run's start) hold nothing back.
func (t *throttle) reject(least int) float64 {
	if t.requests < least {
		return 0
	}
	r, a := float64(t.requests), float64(t.accepts)
	a += 2 * math.Sqrt(a*(1-a/r))
	return max(0, (r-throttleK*a)/(r+1))
}

func (t *throttle) reset() { *t = throttle{} }
