package simengine

import "time"

// admission is what the engine does with a call that arrives.
type admission int

const (
	serve admission = iota // a server is free: it is served now
	wait                   // every server is busy: it waits in the queue
	shed                   // the queue is full too: it is answered at once
)

// ticket is one call inside the engine, waiting or being served.
type ticket struct {
	// ready is closed when the call, queued, is given a server.
	ready chan struct{}
	// at is when it arrived.
	at time.Duration
	// start and service are set, under the engine's lock, when the call is
	// given a server: when, and for how long it holds it.
	start   time.Duration
	service time.Duration

	queued     bool
	prev, next *ticket
}

// core is the servers and the queue, and nothing else: no clock, no HTTP,
// no randomness. Every method is called under the engine's lock.
type core struct {
	servers  int // 0: unlimited
	queueCap int

	busy        int // servers serving a call (a call whose client left included)
	queued      int
	head, tail  *ticket
	maxInSystem int
}

func (c *core) inSystem() int { return c.busy + c.queued }

// free reports whether a server is free.
func (c *core) free() bool { return c.servers == 0 || c.busy < c.servers }

// arrive admits t: it is served at once, queued, or shed.
func (c *core) arrive(t *ticket) admission {
	switch {
	case c.free():
		c.busy++
	case c.queued < c.queueCap:
		t.queued = true
		t.prev, t.next = c.tail, nil
		if c.tail != nil {
			c.tail.next = t
		} else {
			c.head = t
		}
		c.tail = t
		c.queued++
	default:
		return shed
	}
	c.maxInSystem = max(c.maxInSystem, c.inSystem())
	if t.queued {
		return wait
	}
	return serve
}

// finish frees a server at the end of a service.
func (c *core) finish() {
	c.busy--
}

// next gives a free server to the call at the head of the queue and returns
// it, or returns nil when no server is free or nobody waits. The caller
// repeats it until nil: raising Servers can start several calls.
func (c *core) next() *ticket {
	if c.head == nil || !c.free() {
		return nil
	}
	t := c.head
	c.unlink(t)
	c.busy++
	return t
}

// leave takes t out of the queue, when its client gives up, and reports
// whether it was still there; false means it was given a server meanwhile.
func (c *core) leave(t *ticket) bool {
	if !t.queued {
		return false
	}
	c.unlink(t)
	return true
}

func (c *core) unlink(t *ticket) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		c.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		c.tail = t.prev
	}
	t.prev, t.next, t.queued = nil, nil, false
	c.queued--
}
