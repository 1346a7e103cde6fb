package stream

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// keepAlive is the one owner of keep-alives: every InProgress this process
// sends goes out from its run, so slow work is not redelivered under our
// feet. It keeps two kinds of reads alive:
//
//   - a read being handled, through its worker's watch: the first signal
//     early enough to cover the time the read may have waited in the
//     client buffer before a worker took it, then every AckWait/2. A worker
//     fills and clears its watch for every read (a lock and two stores: no
//     timer on the hot path); run scans the watches every tick.
//   - a read waiting in the process (held for a retry, or parked): kept
//     alive every AckWait/2 from the moment it is added, the first signal
//     at once (it may have waited in the client buffer for most of the ack
//     wait, and nothing tells how long). A waiting read with a due time
//     (a held retry) is handed to its owner's due function when that time
//     comes; a parked read has none and waits until it is removed.
type keepAlive struct {
	first, every, tick time.Duration
	now                func() time.Time // the consumer's clock (monoTime): the watches' and the waiting reads'
	onErr              func(string, error)
	onSize             func(n int) // called with the number waiting after each change
	watches            []*watch

	mu    sync.Mutex
	items waitingHeap
	wake  chan struct{}
}

// watch is one worker's read in flight, kept alive.
type watch struct {
	mu   sync.Mutex
	d    *delivery // nil while the worker is idle
	next time.Time // when the next InProgress is due
}

// waiting is a read kept alive while it waits in the process.
type waiting struct {
	d         *delivery
	due       time.Time // never for a parked read
	keepalive time.Time
	index     int
	// ready is called, under the keep-alive lock, when due has come: it
	// returns how much longer the read waits (0: it goes, and then with
	// whatever it was added for).
	ready func(now time.Time) time.Duration
	// then carries out a read whose due time came, outside the lock.
	then func(*delivery)
	// engines: a held retry whose delay grew with the engine's state (its
	// failure credited to the engine, no Retry-After), not with the read's
	// own failures: due sooner once the engine is back (retries.back).
	engines bool
}

// never is the due time of a parked read: it is only kept alive.
var never = time.Unix(1<<62, 0)

func (w *waiting) next() time.Time {
	if w.keepalive.Before(w.due) {
		return w.keepalive
	}
	return w.due
}

func newKeepAlive(o Options, now func() time.Time, onErr func(string, error), onSize func(int)) *keepAlive {
	every := o.AckWait / 2
	// A read may have waited in the client buffer for every read ahead of
	// it: ceil(PullBatch/Concurrency) handler timeouts at most.
	rounds := time.Duration((o.PullBatch + o.Concurrency - 1) / o.Concurrency)
	first := min(every, max(o.AckWait-rounds*o.HandlerTimeout-o.AckWait/10, o.AckWait/10))
	k := &keepAlive{first: first, every: every, tick: max(first/4, time.Millisecond),
		now: now, onErr: onErr, onSize: onSize, wake: make(chan struct{}, 1)}
	for range o.Concurrency {
		k.watches = append(k.watches, &watch{})
	}
	return k
}

// arm starts keeping d alive, counting from start.
func (k *keepAlive) arm(s *watch, d *delivery, start time.Time) {
	s.mu.Lock()
	s.d, s.next = d, start.Add(k.first)
	s.mu.Unlock()
}

// disarm stops keeping the watch's read alive.
func (k *keepAlive) disarm(s *watch) {
	s.mu.Lock()
	s.d = nil
	s.mu.Unlock()
}

// add keeps w alive from now on, its first signal at once.
func (k *keepAlive) add(w *waiting) {
	w.keepalive = k.now()
	k.mu.Lock()
	heap.Push(&k.items, w)
	first := k.items[0] == w
	n := len(k.items)
	k.mu.Unlock()
	k.onSize(n)
	if first {
		signal(k.wake)
	}
}

// remove stops keeping w alive; it reports whether w was still waiting.
func (k *keepAlive) remove(w *waiting) bool {
	k.mu.Lock()
	ok := w.index >= 0 && w.index < len(k.items) && k.items[w.index] == w
	if ok {
		heap.Remove(&k.items, w.index)
		w.index = -1
	}
	n := len(k.items)
	k.mu.Unlock()
	if ok {
		k.onSize(n)
	}
	return ok
}

// take removes and returns every waiting read for which keep reports true.
func (k *keepAlive) take(keep func(*waiting) bool) []*waiting {
	k.mu.Lock()
	var taken []*waiting
	rest := k.items[:0]
	for _, w := range k.items {
		if keep(w) {
			w.index = -1
			taken = append(taken, w)
		} else {
			rest = append(rest, w)
		}
	}
	clear(k.items[len(rest):])
	k.items = rest
	for i, w := range k.items {
		w.index = i
	}
	heap.Init(&k.items)
	n := len(k.items)
	k.mu.Unlock()
	k.onSize(n)
	return taken
}

// hasten brings each waiting read's due time forward to sooner(w), where
// sooner says so and that is earlier; it returns how many it moved.
func (k *keepAlive) hasten(sooner func(*waiting) (time.Time, bool)) int {
	k.mu.Lock()
	n := 0
	for _, w := range k.items {
		if t, ok := sooner(w); ok && t.Before(w.due) {
			w.due = t
			n++
		}
	}
	if n > 0 {
		heap.Init(&k.items)
	}
	k.mu.Unlock()
	if n > 0 {
		signal(k.wake)
	}
	return n
}

// size returns how many reads are waiting.
func (k *keepAlive) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.items)
}

// run sends the keep-alives, and hands waiting reads whose time has come
// to their owner, until ctx ends.
func (k *keepAlive) run(ctx context.Context) {
	scan := time.NewTicker(k.tick)
	defer scan.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(k.wait())
		select {
		case <-ctx.Done():
			return
		case <-scan.C:
			k.scan()
		case <-k.wake:
		case <-timer.C:
		}
	}
}

// scan keeps the reads in flight alive.
func (k *keepAlive) scan() {
	now := k.now()
	for _, s := range k.watches {
		s.mu.Lock()
		if s.d != nil && !now.Before(s.next) {
			k.settle("in_progress", s.d.inProgress())
			s.next = now.Add(k.every)
		}
		s.mu.Unlock()
	}
}

// wait keeps alive the waiting reads whose signal is due, carries out
// those whose time has come, and returns how long until the next.
func (k *keepAlive) wait() time.Duration {
	var due []*waiting
	var alive []*delivery
	now := k.now()
	wait := time.Hour
	k.mu.Lock()
	for len(k.items) > 0 {
		w := k.items[0]
		if n := w.next(); n.After(now) {
			wait = n.Sub(now)
			break
		}
		if !w.due.After(now) {
			if again := w.ready(now); again > 0 {
				w.due = now.Add(again)
				heap.Fix(&k.items, 0)
				continue
			}
			heap.Pop(&k.items)
			w.index = -1
			due = append(due, w)
			continue
		}
		w.keepalive = now.Add(k.every)
		heap.Fix(&k.items, 0)
		alive = append(alive, w.d)
	}
	n := len(k.items)
	k.mu.Unlock()
	if len(due) > 0 {
		k.onSize(n)
	}
	for _, w := range due {
		w.then(w.d)
	}
	for _, d := range alive {
		k.settle("in_progress", d.inProgress())
	}
	return wait
}

func (k *keepAlive) settle(op string, err error) {
	if err != nil && k.onErr != nil {
		k.onErr(op, err)
	}
}

// signal wakes whoever waits on ch, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

type waitingHeap []*waiting

func (h waitingHeap) Len() int           { return len(h) }
func (h waitingHeap) Less(i, j int) bool { return h[i].next().Before(h[j].next()) }
func (h waitingHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitingHeap) Push(x any) {
	w := x.(*waiting)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitingHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}
