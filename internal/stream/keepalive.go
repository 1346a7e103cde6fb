package stream

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepAlive sends InProgress while a read is being handled, so slow work is
// not redelivered under our feet: every AckWait/2, and the first one early
// enough to cover the time the message may have waited in the client buffer
// before a worker took it (at most about one handler timeout).
func (c *Consumer) keepAlive(msg jetstream.Msg) *keeper {
	every := c.o.AckWait / 2
	first := min(every, max(c.o.AckWait-c.o.HandlerTimeout-c.o.AckWait/10, c.o.AckWait/10))
	k := &keeper{msg: msg, every: every, onErr: c.settleError}
	k.t = time.AfterFunc(first, k.tick)
	return k
}

type keeper struct {
	msg   jetstream.Msg
	every time.Duration
	onErr func(string, error)

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

func (k *keeper) tick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.onErr("in_progress", k.msg.InProgress())
	k.t.Reset(k.every)
}

func (k *keeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	k.t.Stop()
}
