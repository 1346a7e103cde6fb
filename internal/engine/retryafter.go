package engine

import "time"

// retryAfters keeps the waits the engine asked for lately, for a pause.
type retryAfters struct {
	recent [16]struct {
		at   time.Duration // monotonic; 0: none
		wait time.Duration
	}
	next  int
	until time.Duration // the end of the last pause handed out (monotonic)
}

// add records a wait asked for at now and returns the longest asked for
// within window.
func (r *retryAfters) add(now, wait, window time.Duration) time.Duration {
	r.recent[r.next].at, r.recent[r.next].wait = max(now, 1), wait
	r.next = (r.next + 1) % len(r.recent)
	var longest time.Duration
	for _, w := range r.recent {
		if w.at != 0 && now-w.at <= window {
			longest = max(longest, w.wait)
		}
	}
	return longest
}
