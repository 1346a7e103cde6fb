package engine

import (
	"math"
	"time"
)

// silence is what the engine answered lately: when it last answered a
// call, and what has failed since.
type silence struct {
	answered time.Duration // when a call was last answered (monotonic; 0: never)
	// failing is when the first call sent after the last answer that
	// failed was sent (0: none).
	failing time.Duration
	// others are the reads whose first attempt failed since the last
	// answer (at most len), k how many of them chance does not explain.
	others [16]uint64
	n      int
	k      int
}

// answer records an answer at now; p is the share of first attempts that
// failed over the window, the chance a read fails on its own.
func (s *silence) answer(now time.Duration, p float64) {
	s.answered, s.failing, s.n = now, 0, 0
	s.k = runOfChance(p)
}

// fail records a failed call sent at sent, answered at now, of read r (a
// first attempt when first). A call sent before the last answer says
// nothing of the engine since.
func (s *silence) fail(now, sent time.Duration, r uint64, first bool) {
	if s.answered != 0 && sent < s.answered {
		return
	}
	if s.failing == 0 {
		s.failing = max(sent, 1)
	}
	if !first || s.n == len(s.others) {
		return
	}
	for _, o := range s.others[:s.n] {
		if o == r {
			return
		}
	}
	s.others[s.n] = r
	s.n++
}

// silent reports calls failing without an answer for quiet or longer.
func (s *silence) silent(now, quiet time.Duration) bool {
	return s.failing != 0 && now-s.failing >= quiet
}

// down reports more other reads' first attempts failed since the last
// answer than chance explains.
func (s *silence) down(r uint64) bool {
	others := 0
	for _, o := range s.others[:s.n] {
		if o != r {
			others++
		}
	}
	return others >= max(s.k, 2)
}

// runOfChance is the fewest failures in a row whose odds are under 1 in
// 10,000 for reads failing on their own with probability p: 2 for a
// healthy engine, 7 where a quarter of the reads fail. Where more than the
// 16 kept would be needed (more than about half the reads fail), no run
// tells an outage from the usual: it is one more than the kept can hold.
func runOfChance(p float64) int {
	if p >= 1 {
		return len(silence{}.others) + 1
	}
	p = max(p, 0.01)
	return min(int(math.Ceil(math.Log(1e-4)/math.Log(p))), len(silence{}.others)+1)
}
