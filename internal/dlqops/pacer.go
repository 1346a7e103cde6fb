package dlqops

import (
	"context"
	"time"
)

// pacer spaces events at least interval apart: the first goes at once, and
// time spent idle does not build up a burst.
type pacer struct {
	interval time.Duration
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error
	next     time.Time
}

func newPacer(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *pacer {
	return &pacer{interval: time.Duration(float64(time.Second) / rate), now: now, sleep: sleep}
}

// wait returns when the next event may go, or ctx's error.
func (p *pacer) wait(ctx context.Context) error {
	now := p.now()
	if p.next.Before(now) {
		p.next = now
	}
	if d := p.next.Sub(now); d > 0 {
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
	}
	p.next = p.next.Add(p.interval)
	return nil
}
