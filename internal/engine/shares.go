package engine

import "time"

// slots is how many slots a window is kept in.
const slots = 10

// shares is the weight of calls, and of those shed, over a sliding window
// of ten slots.
type shares struct {
	window time.Duration
	slots  [slots]struct {
		epoch             int64
		calls, shed, fast float64
		fresh             float64 // weight of first attempts
	}
}

func (s *shares) width() int64 { return max(int64(s.window/slots), 1) }

func (s *shares) add(now time.Duration, w float64, shed, fast bool) {
	e := int64(now) / s.width()
	sl := &s.slots[e%slots]
	if sl.epoch != e {
		sl.epoch, sl.calls, sl.shed, sl.fast, sl.fresh = e, 0, 0, 0, 0
	}
	sl.calls += w
	if w == 1 {
		sl.fresh++
	}
	if shed {
		sl.shed += w
	}
	if fast {
		sl.fast += w
	}
}

// share is the shed share and the fast-shed share over the window,
// whether the calls weigh at least least (below it, a share says nothing),
// and whether retries are most of the weight.
func (s *shares) share(now time.Duration, least float64) (shed, fast float64, ok, retries bool) {
	e := int64(now) / s.width()
	var calls, fresh float64
	for _, sl := range s.slots {
		if e-sl.epoch < slots {
			calls += sl.calls
			shed += sl.shed
			fast += sl.fast
			fresh += sl.fresh
		}
	}
	retries = 2*fresh < calls
	if calls < least || calls == 0 {
		return 0, 0, false, retries
	}
	return shed / calls, fast / calls, true, retries
}
