package stream

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// workers is the pool that handles reads: Concurrency goroutines, each with
// its keep-alive watch, taking parked reads first, then pulled reads from
// work. A worker that takes a parked read while more are parked wakes
// another, so that a park emptied at once keeps every idle worker busy.
type workers struct {
	work chan jetstream.Msg
	quit chan struct{}
	wg   sync.WaitGroup
}

// startWorkers starts the pool; graceful, hard and giveUp are handle's
// contexts.
func (c *Consumer) startWorkers(graceful, hard, giveUp context.Context) *workers {
	p := &workers{work: make(chan jetstream.Msg), quit: make(chan struct{})}
	for _, w := range c.keepers.watches {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				if msg, ok := c.delayer.takeParked(); ok {
					c.handle(graceful, hard, giveUp, msg, w)
					continue
				}
				select {
				case msg := <-p.work:
					c.handle(graceful, hard, giveUp, msg, w)
				case <-c.delayer.wakeWorker:
				case <-p.quit:
					return
				}
			}
		}()
	}
	return p
}

// stop lets each worker finish its read, then waits for them.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}
