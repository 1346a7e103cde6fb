package stream

import (
	"context"
	"sync"
)

// group is goroutines that share one lifetime: stop ends it and waits for
// every one of them.
type group struct {
	end context.CancelFunc
	wg  sync.WaitGroup
}

// start runs each fn in its own goroutine, under a context that ends with
// stop (never with parent's end: parent only gives its values).
func start(parent context.Context, fns ...func(context.Context)) *group {
	ctx, end := context.WithCancel(context.WithoutCancel(parent))
	g := &group{end: end}
	for _, fn := range fns {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			fn(ctx)
		}()
	}
	return g
}

// stop ends the group's lifetime and waits for its goroutines.
func (g *group) stop() {
	g.end()
	g.wg.Wait()
}

// workers is the pool that handles reads: Concurrency goroutines, each with
// its keep-alive watch, taking parked reads first, then pulled reads from
// work. A worker that takes a parked read while more are parked wakes
// another, so that a park emptied at once keeps every idle worker busy.
// Stopping the pool lets each worker finish its read.
type workers struct {
	work chan *delivery
	*group
}

// startWorkers starts the pool, its lifetime the run's graceful one; each
// read is handled within the run's lifetimes.
func (c *Consumer) startWorkers(life lifetimes) *workers {
	p := &workers{work: make(chan *delivery)}
	fns := make([]func(context.Context), 0, len(c.keep.watches))
	for _, w := range c.keep.watches {
		fns = append(fns, func(quit context.Context) {
			for {
				if d, ok := c.park.take(); ok {
					c.handle(life, d, w)
					continue
				}
				select {
				case d := <-p.work:
					c.handle(life, d, w)
				case <-c.park.wakeWorker:
				case <-quit.Done():
					return
				}
			}
		})
	}
	p.group = start(life.graceful, fns...)
	return p
}
