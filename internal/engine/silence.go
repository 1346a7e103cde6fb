package engine

import (
	"math"
	"time"
)

// silence is what the engine answered lately: when it last answered a
// call, and what has failed since.
type silence struct {
	answered time.Duration // when a call was last answered (monotonic; 0: never)
	// recent are the times of the last answers (a ring; 0: none), for the
	// rate the engine answers at.
	recent [16]time.Duration
	next   int
	// failing is when the first call sent after the last answer that
	// failed was sent (0: none).
	failing time.Duration
	// others are the reads whose first attempt failed since the last
	// answer (at most len), k how many of them chance does not explain.
	others [16]uint64
	n      int
	k      int
	// failed is how many calls sent after the last answer failed.
	failed int
}

// answer records an answer at now; p is the share of first attempts that
// failed over the window, the chance a read fails on its own.
func (s *silence) answer(now time.Duration, p float64) {
	s.answered, s.failing, s.n, s.failed = now, 0, 0, 0
	s.recent[s.next] = max(now, 1)
	s.next = (s.next + 1) % len(s.recent)
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
	s.failed++
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

// silent reports calls failing without an answer for longer, and more of
// them, than chance explains: at least quiet, long enough that a gap so
// long between the engine's answers, at the rate it answered the last of
// them, has odds under 1 in 10,000 (9.2 mean gaps), and twice the longest
// gap between them; and a run of failed
// calls with the same odds at the share of first attempts that failed
// before (k, as for down). A replica the engine answered a tenth of the
// time (one joining an engine kept full by others) never takes a run of
// failures for an outage, however few calls it makes; one that the engine
// answered well, and that calls little, needs its quiet as well as its
// run. Before its first answer, four times quiet and a failed call: a
// replica joining an engine kept full by others may wait a while for the
// first of its calls to find room, and one whose engine is down from the
// start loses little more than that second.
func (s *silence) silent(now, quiet time.Duration) bool {
	if s.failing == 0 || s.failed < max(s.k, 1) {
		return false
	}
	wait := 4 * quiet
	if s.answered != 0 {
		// The answers, in the order they came, and the longest gap between
		// them: the engine's answers come in bursts where others keep it
		// full (a replica gets in when they back off), and a silence long
		// next to the mean gap is not next to the longest.
		var at []time.Duration
		for i := range s.recent {
			if a := s.recent[(s.next+i)%len(s.recent)]; a != 0 {
				at = append(at, a)
			}
		}
		wait = quiet
		if len(at) > 1 {
			var gap, longest time.Duration
			for i := 1; i < len(at); i++ {
				longest = max(longest, at[i]-at[i-1])
			}
			gap = (at[len(at)-1] - at[0]) / time.Duration(len(at)-1)
			wait = max(quiet, time.Duration(9.2*float64(gap)), 2*longest)
		}
	}
	return now-s.failing >= wait
}

// down reports more other reads' first attempts failed since the last
// answer than chance explains (never, where that is more than it keeps).
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
// healthy engine, 7 where a quarter of the reads fail, 88 where nine in
// ten do (more than down keeps: it never finds those).
func runOfChance(p float64) int {
	if p >= 0.999 {
		return math.MaxInt32
	}
	p = max(p, 0.01)
	return int(math.Ceil(math.Log(1e-4) / math.Log(p)))
}
