package stream

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
)

// park is where pulled reads wait for a worker while the breaker is open,
// or while the workers are behind, and for their hand-back once the stop
// has begun: oldest first, kept alive by the keep-alive owner, never
// charged an attempt (they were not delivered).
// Workers take parked reads before new ones; follow stops pulling while
// the park is full.
type park struct {
	keep *keepAlive

	mu    sync.Mutex
	byD   map[*delivery]*list.Element // of *waiting, to unpark a read
	order list.List                   // of *waiting, oldest first
	n     atomic.Int64                // order.Len(), read without the lock

	// parked is signalled on every park and taken on every take (for the
	// follower); wakeWorker wakes an idle worker when a read is parked,
	// and again while parked reads remain after one is taken.
	parked, taken, wakeWorker chan struct{}
	// released is the hand-back of release, once it ran: a read parked
	// after it (a drain that outlived the stop) is handed back at once,
	// not left where nothing keeps it alive or takes it.
	released func(*delivery, error)
}

func newPark(keep *keepAlive) *park {
	return &park{keep: keep, byD: make(map[*delivery]*list.Element),
		parked: make(chan struct{}, 1), taken: make(chan struct{}, 1), wakeWorker: make(chan struct{}, 1)}
}

// len returns how many reads are parked, without a lock.
func (p *park) len() int { return int(p.n.Load()) }

// add parks msg until a worker takes it (or release hands it back).
func (p *park) add(d *delivery) {
	w := &waiting{d: d, due: never}
	p.mu.Lock()
	if handBack := p.released; handBack != nil {
		p.mu.Unlock()
		handBack(d, errParkedAtStop)
		return
	}
	p.byD[d] = p.order.PushBack(w)
	p.n.Add(1)
	p.keep.add(w) // under the park's lock: a take always finds it kept alive
	p.mu.Unlock()
	signal(p.parked)
	signal(p.wakeWorker)
}

// remove takes msg out of the park if it is there; it reports whether it
// was.
func (p *park) remove(d *delivery) bool {
	if p.n.Load() == 0 {
		return false
	}
	p.mu.Lock()
	e, ok := p.byD[d]
	if ok {
		p.unpark(e)
	}
	p.mu.Unlock()
	return ok
}

// take unparks and returns the read parked longest, if any. Choosing and
// removing happen under one lock, so two workers never pick the same read
// (which would leave another parked read without a worker).
func (p *park) take() (*delivery, bool) {
	if p.n.Load() == 0 {
		return nil, false
	}
	p.mu.Lock()
	front := p.order.Front()
	if front == nil {
		p.mu.Unlock()
		return nil, false
	}
	w := p.unpark(front)
	left := p.n.Load()
	p.mu.Unlock()
	signal(p.taken)
	if left > 0 {
		signal(p.wakeWorker)
	}
	return w.d, true
}

// unpark removes e; the caller holds the lock.
func (p *park) unpark(e *list.Element) *waiting {
	w := p.order.Remove(e).(*waiting)
	delete(p.byD, w.d)
	p.n.Add(-1)
	p.keep.remove(w)
	return w
}

// release hands every parked read back to the server through handBack,
// for a stop (it was never delivered downstream: no attempt is charged);
// it returns how many. A read parked after it is handed back at once.
func (p *park) release(handBack func(*delivery, error)) int {
	p.mu.Lock()
	p.released = handBack
	var parked []*delivery
	for e := p.order.Front(); e != nil; e = p.order.Front() {
		parked = append(parked, p.unpark(e).d)
	}
	p.mu.Unlock()
	// Each hand-back may look a record up before its NAK: a few at a time.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, m := range parked {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			handBack(m, errParkedAtStop)
		}()
	}
	wg.Wait()
	return len(parked)
}

var errParkedAtStop = fmt.Errorf("%w: the read waited for the breaker", errStopping)
