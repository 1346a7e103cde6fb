package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// traceEvery is how often a traced fleet is sampled.
const traceEvery = 5 * time.Millisecond

// tracer writes a fleet's timeline, one tab-separated line every
// traceEvery from its first replica's start until it stops: the cell, the
// milliseconds since, the engine's calls and sheds so far, and the limit of
// each replica started. It shows how a fleet finds an engine's room, which
// the cell's totals do not (Config.EnginesTrace).
type tracer struct {
	w     io.Writer
	cell  string
	stats func() simengine.Stats // set by drainTraffic
}

// follow samples f until the function it returns is called; a nil tracer
// samples nothing.
func (t *tracer) follow(f *fleet) (stop func()) {
	if t == nil || t.stats == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(traceEvery)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			st := t.stats()
			fmt.Fprintf(t.w, "%s\t%d\t%d\t%d\t%v\n", t.cell, time.Since(start).Milliseconds(), st.Calls, st.Shed, f.limits())
		}
	}()
	return sync.OnceFunc(func() { close(quit); <-done })
}
