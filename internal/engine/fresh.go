package engine

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// fresh is the last first attempts (calls of reads that had not failed
// before), a ring of at most len(calls) of them, none older than maxAge:
// the evidence every share is judged on. Only first attempts count: a
// retry is a read chosen by its own failure, so retries lift the share of
// an engine that fails a few reads for good (at the end of a backlog they
// are all that is left); the first attempts are an unbiased sample of what
// the engine does to a read now. The window is counted in calls, not time,
// so a replica at 10 reads a second and one at 2,000 judge the same engine
// on the same evidence.
type fresh struct {
	maxAge time.Duration
	calls  []freshCall
	head   int // the oldest
	n      int
	shed   int // of the n, shed
	failed int // of the n, shed or failed otherwise
}

type freshCall struct {
	at, sent     time.Duration // monotonic, when it was answered and sent
	shed, failed bool
	inFlight     int
}

func newFresh(size int, maxAge time.Duration) fresh {
	return fresh{maxAge: maxAge, calls: make([]freshCall, size)}
}

// add records a first attempt answered at now.
func (f *fresh) add(now, sent time.Duration, shed, failed bool, inFlight int) {
	f.expire(now)
	if f.n == len(f.calls) {
		f.drop()
	}
	f.calls[(f.head+f.n)%len(f.calls)] = freshCall{at: now, sent: sent, shed: shed, failed: failed, inFlight: inFlight}
	f.n++
	if shed {
		f.shed++
	}
	if failed {
		f.failed++
	}
}

// since hands f every call held sent at from or later.
func (f *fresh) since(from time.Duration, g func(sentCall)) {
	for i := range f.n {
		if c := f.calls[(f.head+i)%len(f.calls)]; c.sent >= from {
			g(sentCall{sent: c.sent, shed: c.shed, inFlight: c.inFlight})
		}
	}
}

// drop forgets the oldest call.
func (f *fresh) drop() {
	c := f.calls[f.head]
	if c.shed {
		f.shed--
	}
	if c.failed {
		f.failed--
	}
	f.head = (f.head + 1) % len(f.calls)
	f.n--
}

// reset forgets every call.
func (f *fresh) reset() {
	f.head, f.n, f.shed, f.failed = 0, 0, 0, 0
}

// expire forgets the calls older than maxAge.
func (f *fresh) expire(now time.Duration) {
	for f.n > 0 && now-f.calls[f.head].at > f.maxAge {
		f.drop()
	}
}

// counts is the calls in the window at now, and how many were shed.
func (f *fresh) counts(now time.Duration) (n, shed int) {
	f.expire(now)
	return f.n, f.shed
}

// span is how long the last k first attempts took to come (0 with fewer
// than two of them).
func (f *fresh) span(now time.Duration, k int) time.Duration {
	f.expire(now)
	k = min(k, f.n)
	if k < 2 {
		return 0
	}
	newest := f.calls[(f.head+f.n-1)%len(f.calls)].at
	oldest := f.calls[(f.head+f.n-k)%len(f.calls)].at
	return newest - oldest
}

// failShare is the share of the window's calls that failed (shed or
// otherwise), and whether the window holds any.
func (f *fresh) failShare(now time.Duration) (float64, bool) {
	f.expire(now)
	if f.n == 0 {
		return 0, false
	}
	return float64(f.failed) / float64(f.n), true
}

// sigma is the standard deviation of a share p drawn from n calls.
func sigma(p float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return math.Sqrt(p * (1 - p) / float64(n))
}

// first is a call answered, waiting to be counted (a first attempt when
// fresh).
type first struct {
	sent                     time.Duration // monotonic
	fresh, shed, failed, low bool
	inFlight                 int
}

// maxPending bounds the first attempts waiting: past it the oldest are
// counted at once (an engine answering in seconds at thousands a second).
const maxPending = 4096

// pending is the calls answered and not yet counted, in the order they
// were answered, and the earliest sent among them.
type pending struct {
	calls    []first
	due      []first // take's batch, kept for its backing array
	earliest time.Duration
}

func (p *pending) add(f first) {
	if len(p.calls) == 0 || f.sent < p.earliest {
		p.earliest = f.sent
	}
	p.calls = append(p.calls, f)
}

// take hands f every call sent before before, in the order they were
// sent, and any past maxPending, and forgets them. It looks only once the
// earliest is slack past before (a quarter of the horizon: the calls are
// counted a little late, in batches, rather than the whole list scanned
// every call). The order matters: the trial is judged after each call, and
// handed in the order answered, a batch's failures answered at once came
// before the successes sent beside them, so that a dip's first calls
// looked shed twice as often as they were (6 of 10, 10 of 21, where a
// quarter fail on their own) and its trial started again as rising.
func (p *pending) take(before, slack time.Duration, f func(first)) {
	over := len(p.calls) - maxPending
	if len(p.calls) == 0 || (p.earliest >= before-slack && over <= 0) {
		return
	}
	keep, due := p.calls[:0], p.due[:0]
	for i, c := range p.calls {
		if c.sent < before || i < over {
			due = append(due, c)
			continue
		}
		if len(keep) == 0 || c.sent < p.earliest {
			p.earliest = c.sent
		}
		keep = append(keep, c)
	}
	slices.SortStableFunc(due, func(a, b first) int { return cmp.Compare(a.sent, b.sent) })
	for _, c := range due {
		f(c)
	}
	p.due = due
	clear(p.calls[len(keep):])
	p.calls = keep
}

// sentCall is a first attempt: when it was sent, whether it was shed,
// and the calls in flight once it was (0: not known).
type sentCall struct {
	sent     time.Duration
	shed     bool
	inFlight int
}

// tally is a count of calls, of those shed, and of the calls in flight
// they were sent with.
type tally struct{ n, shed, inFlight int }

func (t *tally) add(c sentCall) {
	t.n++
	t.inFlight += c.inFlight
	if c.shed {
		t.shed++
	}
}

// flight is the calls in flight, on average, the calls were sent with.
func (t tally) flight() float64 {
	if t.n == 0 {
		return 0
	}
	return float64(t.inFlight) / float64(t.n)
}

func (t tally) share() float64 {
	if t.n == 0 {
		return 0
	}
	return float64(t.shed) / float64(t.n)
}
