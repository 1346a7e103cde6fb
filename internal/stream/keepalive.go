package stream

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepers send InProgress for the reads being handled, so slow work is not
// redelivered under our feet: the first one early enough to cover the time
// the message may have waited in the client buffer before a worker took it,
// then every AckWait/2. Each worker owns a watch it fills and clears for
// every read (a lock and two stores: no timer on the hot path); one
// goroutine scans the watches.
type keepers struct {
	first, every, tick time.Duration
	now                func() time.Time
	onErr              func(string, error)
	watches            []*watch
}

// watch is one worker's read in flight, kept alive.
type watch struct {
	mu   sync.Mutex
	msg  jetstream.Msg // nil while the worker is idle
	next time.Time     // when the next InProgress is due
}

func (c *Consumer) newKeepers(n int) *keepers {
	every := c.o.AckWait / 2
	// A read may have waited in the client buffer for every read ahead of
	// it: ceil(PullBatch/Concurrency) handler timeouts at most.
	rounds := time.Duration((c.o.PullBatch + c.o.Concurrency - 1) / c.o.Concurrency)
	first := min(every, max(c.o.AckWait-rounds*c.o.HandlerTimeout-c.o.AckWait/10, c.o.AckWait/10))
	k := &keepers{first: first, every: every, tick: max(first/4, time.Millisecond), now: time.Now, onErr: c.settleError}
	for range n {
		k.watches = append(k.watches, &watch{})
	}
	return k
}

// arm starts keeping msg alive, counting from start.
func (k *keepers) arm(s *watch, msg jetstream.Msg, start time.Time) {
	s.mu.Lock()
	s.msg, s.next = msg, start.Add(k.first)
	s.mu.Unlock()
}

// disarm stops keeping the watch's read alive.
func (k *keepers) disarm(s *watch) {
	s.mu.Lock()
	s.msg = nil
	s.mu.Unlock()
}

// run scans the watches until ctx ends.
func (k *keepers) run(ctx context.Context) {
	t := time.NewTicker(k.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := k.now()
		for _, s := range k.watches {
			s.mu.Lock()
			if s.msg != nil && !now.Before(s.next) {
				k.onErr("in_progress", s.msg.InProgress())
				s.next = now.Add(k.every)
			}
			s.mu.Unlock()
		}
	}
}
