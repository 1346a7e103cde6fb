package engine_test

import (
	"testing"
	"time"

	"github.com/meterline/meter-consumer/internal/engine"
)

// BenchmarkObserve is the View's work per call that the engine served, on
// the real clock: the cost every read pays once, under the View's lock.
func BenchmarkObserve(b *testing.B) {
	v, err := engine.New(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var read uint64
	for b.Loop() {
		read++
		v.Observe(engine.Call{Read: read, Answer: engine.Served, Latency: time.Millisecond})
	}
}
