package stream

import (
	"container/heap"
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// delayer holds NAKed reads in the process until their retry delay is over,
// then NAKs them without a delay, which the server redelivers at once. Held
// reads are kept alive with InProgress so AckWait never expires under them.
//
// Why not NakWithDelay: every NAK that carries a delay resets the server's
// redelivery timer to 10ms, so under a steady rate of failures (one NAK every
// few milliseconds, or a fleet of replicas NAKing) the timer never fires and
// every expired delay is redelivered in one burst when the NAKs pause: the
// herd the jitter was meant to spread, put back together by the server. A
// plain NAK goes straight onto the redelivery queue, so each read comes back
// when its own delay says, whatever the rest of the fleet is doing. The
// delay is only handed to the server (NakWithDelay) when the process stops.
type delayer struct {
	keepEvery time.Duration
	now       func() time.Time
	onErr     func(op string, err error)
	onSize    func(n int) // called with the number held after each change

	mu     sync.Mutex
	items  heldHeap
	byMsg  map[jetstream.Msg]*held // parked reads, to unpark them
	order  list.List               // parked reads, oldest first
	parked atomic.Int64            // len(byMsg), read without the lock
	wake   chan struct{}
	parkCh chan struct{} // signalled on every park (for the follower)
	// takenCh is signalled when a parked read is taken (for the follower);
	// wakeWorker wakes an idle worker when a read is parked, and again
	// while parked reads remain after one is taken.
	takenCh, wakeWorker chan struct{}
	// gate decides whether a retry that is due may go now; when it may
	// not, the read is held again for the returned time (nil: always).
	gate func() (bool, time.Duration)
}

// never is the due time of a parked read: it is only kept alive.
var never = time.Unix(1<<62, 0)

type held struct {
	msg       jetstream.Msg
	due       time.Time
	keepalive time.Time
	index     int
	retry     bool          // a retry of the downstream call: goes through the gate
	parked    *list.Element // its place in order, while parked
}

func (h *held) next() time.Time {
	if h.keepalive.Before(h.due) {
		return h.keepalive
	}
	return h.due
}

func newDelayer(keepEvery time.Duration, now func() time.Time, onErr func(string, error), onSize func(int)) *delayer {
	return &delayer{keepEvery: keepEvery, now: now, onErr: onErr, onSize: onSize,
		wake: make(chan struct{}, 1), parkCh: make(chan struct{}, 1),
		takenCh: make(chan struct{}, 1), wakeWorker: make(chan struct{}, 1)}
}

// hold keeps msg until delay has passed, then NAKs it; a retry (of the
// downstream call) also waits for the gate. A delay of zero NAKs at once
// when nothing gates it.
//
// The first keep-alive goes out at once: the read may have waited in the
// client buffer for most of the ack wait before a worker took it, and
// nothing tells how long.
func (d *delayer) hold(msg jetstream.Msg, delay time.Duration, retry bool) {
	if delay <= 0 && (!retry || d.gate == nil) {
		d.settle("nak", msg.Nak())
		return
	}
	now := d.now()
	it := &held{msg: msg, due: now.Add(delay), keepalive: now, retry: retry}
	d.mu.Lock()
	heap.Push(&d.items, it)
	first := d.items[0] == it
	n := len(d.items)
	d.mu.Unlock()
	d.onSize(n)
	if first {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// park keeps msg alive, without a due time, until unpark takes it back (or
// release hands it back to the server). It is where reads wait while the
// breaker is open. As with hold, the first keep-alive goes out at once.
func (d *delayer) park(msg jetstream.Msg) {
	it := &held{msg: msg, due: never, keepalive: d.now()}
	d.mu.Lock()
	if d.byMsg == nil {
		d.byMsg = make(map[jetstream.Msg]*held)
	}
	d.byMsg[msg] = it
	it.parked = d.order.PushBack(it)
	d.parked.Add(1)
	heap.Push(&d.items, it)
	first := d.items[0] == it
	n := len(d.items)
	d.mu.Unlock()
	d.onSize(n)
	signal(d.parkCh)
	signal(d.wakeWorker)
	if first {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// unpark stops keeping a parked msg alive; it reports whether msg was parked.
func (d *delayer) unpark(msg jetstream.Msg) bool {
	if d.parked.Load() == 0 {
		return false
	}
	d.mu.Lock()
	it, ok := d.byMsg[msg]
	if ok {
		delete(d.byMsg, msg)
		d.order.Remove(it.parked)
		d.parked.Add(-1)
		heap.Remove(&d.items, it.index)
	}
	n := len(d.items)
	d.mu.Unlock()
	if ok {
		d.onSize(n)
	}
	return ok
}

// takeParked unparks and returns the read parked longest, if any. Choosing
// and removing happen under one lock, so two workers never pick the same
// read (which would leave another parked read without a worker).
func (d *delayer) takeParked() (jetstream.Msg, bool) {
	if d.parked.Load() == 0 {
		return nil, false
	}
	d.mu.Lock()
	front := d.order.Front()
	if front == nil {
		d.mu.Unlock()
		return nil, false
	}
	it := d.order.Remove(front).(*held)
	delete(d.byMsg, it.msg)
	left := d.parked.Add(-1)
	heap.Remove(&d.items, it.index)
	n := len(d.items)
	d.mu.Unlock()
	d.onSize(n)
	signal(d.takenCh)
	if left > 0 {
		signal(d.wakeWorker)
	}
	return it.msg, true
}

// signal wakes whoever waits on ch, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// size returns how many reads are held.
func (d *delayer) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items)
}

// run NAKs each held read when its delay is over until ctx ends.
func (d *delayer) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due, alive []jetstream.Msg
	for {
		due, alive = due[:0], alive[:0]
		now := d.now()
		wait := time.Hour
		d.mu.Lock()
		for len(d.items) > 0 {
			it := d.items[0]
			if n := it.next(); n.After(now) {
				wait = n.Sub(now)
				break
			}
			if !it.due.After(now) {
				if it.retry && d.gate != nil {
					if ok, again := d.gate(); !ok {
						it.due = now.Add(again) // over the retry budget: held again, not charged
						heap.Fix(&d.items, 0)
						continue
					}
				}
				heap.Pop(&d.items)
				due = append(due, it.msg)
				continue
			}
			it.keepalive = now.Add(d.keepEvery)
			heap.Fix(&d.items, 0)
			alive = append(alive, it.msg)
		}
		n := len(d.items)
		d.mu.Unlock()
		if len(due) > 0 {
			d.onSize(n)
		}
		for _, m := range due {
			d.settle("nak", m.Nak())
		}
		for _, m := range alive {
			d.settle("in_progress", m.InProgress())
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// release gives every read back to the server, for a shutdown: a read held
// for a retry with the rest of its delay (NakWithDelay: the retry it was
// waiting for), a parked read through handBack (it was never delivered
// downstream: no attempt is charged). Reads are kept alive by run until
// release takes them.
func (d *delayer) release(handBack func(jetstream.Msg, error)) int {
	d.mu.Lock()
	items := d.items
	d.items, d.byMsg = nil, nil
	d.order.Init()
	d.parked.Store(0)
	d.mu.Unlock()
	d.onSize(0)
	now := d.now()
	var parked []jetstream.Msg
	for _, it := range items {
		if it.due == never {
			parked = append(parked, it.msg)
		} else if rest := it.due.Sub(now); rest > 0 {
			d.settle("nak", it.msg.NakWithDelay(rest))
		} else {
			d.settle("nak", it.msg.Nak())
		}
	}
	// Each hand-back writes a record before its NAK: a few at a time.
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
	return len(items)
}

var errParkedAtStop = fmt.Errorf("%w: the read waited for the breaker", errStopping)

func (d *delayer) settle(op string, err error) {
	if err != nil && d.onErr != nil {
		d.onErr(op, err)
	}
}

type heldHeap []*held

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].next().Before(h[j].next()) }
func (h heldHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *heldHeap) Push(x any) {
	it := x.(*held)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *heldHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
