package engine

import (
	"math"
	"time"
)

// buckets is how many buckets a window is kept in.
const buckets = 10

// shares is the weight of calls, of those shed, and of the sheds answered
// quickly (under half the latency baseline), over a sliding window of ten
// buckets.
type shares struct {
	window  time.Duration
	buckets [buckets]bucket
}

// bucket is one bucket of a window.
type bucket struct {
	epoch             int64
	calls, shed, fast float64 // fast: sheds answered quickly
	fresh, freshShed  float64 // weight of first attempts, and of those shed
	served            float64 // answered: 2xx or a permanent answer
	throttled         float64 // shed with a Retry-After
}

// call is what shares counts of one call.
type call struct {
	w                               float64
	shed, quick, served, retryAfter bool
}

func (s *shares) width() int64 { return max(int64(s.window/buckets), 1) }

// add counts a call of weight c.w: shed or not (with a Retry-After or
// not), a shed answered quickly, or answered.
func (s *shares) add(now time.Duration, c call) {
	e := int64(now) / s.width()
	sl := &s.buckets[e%buckets]
	if sl.epoch != e {
		*sl = bucket{epoch: e}
	}
	sl.calls += c.w
	if c.w == 1 {
		sl.fresh++
	}
	if c.shed {
		sl.shed += c.w
		if c.w == 1 {
			sl.freshShed++
		}
		if c.quick {
			sl.fast += c.w
		}
		if c.retryAfter {
			sl.throttled += c.w
		}
	}
	if c.served {
		sl.served += c.w
	}
}

// share is the shed share and the fast-shed share over the window,
// whether the calls weigh at least least (below it, a share says nothing),
// and whether retries are most of the weight.
//
// Retries are the reads chosen by their own failures: their sheds count
// only up to the share of first attempts shed in the same window. Where a
// fifth of the reads fail on their own, the retries of those that always
// fail are shed every time, and as first attempts thin out at the end of a
// backlog they would otherwise lift the share past any threshold; where
// the engine sheds everyone, first attempts are shed as much and the
// retries count in full.
//
// The fast share counts the sheds answered quickly beyond the share quick
// of the answered calls (quick), and beyond chance: of an engine whose
// latency spreads, a read's own 503 is as often quick as its 200s are; a
// load shedder's refusals are quick where its answers are not.
func (s *shares) share(now time.Duration, least, quick float64) (shed, fast float64, ok, retries bool) {
	e := int64(now) / s.width()
	var calls, fresh, freshShed, all float64
	for _, sl := range s.buckets {
		if e-sl.epoch < buckets {
			calls += sl.calls
			all += sl.shed
			fast += sl.fast
			fresh += sl.fresh
			freshShed += sl.freshShed
		}
	}
	retries = 2*fresh < calls
	if calls < least || calls == 0 {
		return 0, 0, false, retries
	}
	shed = freshShed
	if fresh > 0 {
		shed += min(all-freshShed, (calls-fresh)*freshShed/fresh)
	}
	// Beyond what chance gives too: two standard deviations of as many
	// sheds drawn at the answers' quick share. The weights are at most 1,
	// so all*q*(1-q) bounds the variance from above. As a backlog ends, the
	// few sheds of the reads that always fail lay a share a little past 5%
	// as often as not.
	fast = max(fast-all*quick-2*math.Sqrt(all*quick*(1-quick)), 0)
	return shed / calls, fast / calls, true, retries
}

// served is the share of the weight answered over the window, and whether
// the calls weigh at least least.
func (s *shares) served(now time.Duration, least float64) (float64, bool) {
	return s.of(now, least, func(sl bucket) float64 { return sl.served })
}

// throttled is the share of the weight shed with a Retry-After over the
// window, and whether the calls weigh at least least.
func (s *shares) throttled(now time.Duration, least float64) (float64, bool) {
	return s.of(now, least, func(sl bucket) float64 { return sl.throttled })
}

// of is the share of the weight that part picks out of each bucket.
func (s *shares) of(now time.Duration, least float64, part func(bucket) float64) (float64, bool) {
	calls, picked := s.sum(now, part)
	if calls < least || calls == 0 {
		return 0, false
	}
	return picked / calls, true
}

// weight is the calls' weight over the window.
func (s *shares) weight(now time.Duration) float64 {
	calls, _ := s.sum(now, func(bucket) float64 { return 0 })
	return calls
}

// sum is the calls' weight over the window, and what part picks out of
// each of its buckets.
func (s *shares) sum(now time.Duration, part func(bucket) float64) (calls, picked float64) {
	e := int64(now) / s.width()
	for _, sl := range s.buckets {
		if e-sl.epoch < buckets {
			calls += sl.calls
			picked += part(sl)
		}
	}
	return calls, picked
}
