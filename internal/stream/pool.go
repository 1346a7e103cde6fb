package stream

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// workers is the pool that handles reads: Concurrency goroutines, each with
// its keep-alive slot, taking parked reads first, then pulled reads from
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
	w := &workers{work: make(chan jetstream.Msg), quit: make(chan struct{})}
	for _, s := range c.keepers.slots {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				if msg, ok := c.delayer.takeParked(); ok {
					c.handle(graceful, hard, giveUp, msg, s)
					continue
				}
				select {
				case msg := <-w.work:
					c.handle(graceful, hard, giveUp, msg, s)
				case <-c.delayer.wakeWorker:
				case <-w.quit:
					return
				}
			}
		}()
	}
	return w
}

// stop lets each worker finish its read, then waits for them.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}
