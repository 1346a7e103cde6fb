package engine

import "time"

// throttled is one Retry-After the engine sent.
type throttled struct {
	at   time.Duration // the monotonic clock's reading
	set  bool
	read uint64
	wait time.Duration
}

// throttle keeps the last Retry-Afters, to tell one read throttled from an
// engine throttling broadly.
type throttle struct {
	window time.Duration
	reads  int
	recent [16]throttled
	next   int
	until  time.Duration // the end of the last pause handed out (monotonic)
}

// add records a Retry-After of read and returns the largest wait asked for
// within the window when at least reads distinct reads asked (else 0).
func (t *throttle) add(now time.Duration, read uint64, wait time.Duration) time.Duration {
	t.recent[t.next] = throttled{at: now, set: true, read: read, wait: wait}
	t.next = (t.next + 1) % len(t.recent)
	var seen [len(throttle{}.recent)]uint64
	distinct := 0
	var longest time.Duration
	for _, r := range t.recent {
		if !r.set || now-r.at > t.window {
			continue
		}
		longest = max(longest, r.wait)
		dup := false
		for _, s := range seen[:distinct] {
			dup = dup || s == r.read
		}
		if !dup {
			seen[distinct] = r.read
			distinct++
		}
	}
	if distinct < t.reads {
		return 0
	}
	return longest
}
