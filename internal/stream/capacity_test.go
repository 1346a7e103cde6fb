//go:build load

package stream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// Against an engine with a capacity (4 servers of 10ms, a queue of 4: 400
// reads a second, 8 calls in the system at most), 32 workers calling at
// once would be shed most of the time. The adaptive limit finds the
// capacity: few calls shed, none dead-lettered. With the limit off the same
// backlog is mostly shed.
//
// Behind the load tag (README), not parallel: it compares shares shed measured on the wall clock, which a
// client starved of CPU misreads (beside the suite's parallel tests under
// the race detector, once 38% with the limit against 56% without).
func TestTheAdaptiveLimitFindsTheEnginesCapacity(t *testing.T) {
	run := func(t *testing.T, adaptive bool) simengine.Stats {
		e := newEnv(t, nil)
		eng, err := simengine.New(simengine.Options{Servers: 4, ServiceTime: 10 * time.Millisecond, Queue: 4})
		require.NoError(t, err)
		srv := simengine.NewServer(eng)
		t.Cleanup(srv.Close)
		o := e.options(81)
		o.Concurrency = 32
		o.Policy.MaxAttempts = 8
		sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Concurrency: 32})
		require.NoError(t, err)
		o.Sink = sink
		if adaptive {
			l, err := limit.New(limit.Options{Max: o.Concurrency})
			require.NoError(t, err)
			o.Limiter = l
		}
		const reads = 600
		for i := range reads {
			e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		}
		e.start(o)
		e.settled(60 * time.Second)
		s := eng.Stats()
		t.Logf("adaptive=%v: %d calls, %d billed, %d shed (%.0f%%), in system at most %d, p99 latency %s, limit %v, %d dead-lettered",
			adaptive, s.Calls, s.Billed, s.Shed, 100*float64(s.Shed)/float64(s.Calls), s.MaxInSystem,
			eng.Latencies().Quantile(0.99), testutil.ToFloat64(counterGauge(t, e, "meter_consumer_concurrency_limit")), len(e.deadLetters()))
		if adaptive {
			assert.Empty(t, e.deadLetters(), "no read dead-lettered for the engine's overload")
			assert.EqualValues(t, reads, s.Billed)
		}
		return s
	}
	with := run(t, true)
	without := run(t, false)
	// The engine's view finds the sheds its load in a trial (they fall in
	// its dips), and the limit halves on them from then on (before, only
	// where the engine refuses most), so the limit rides at the engine's
	// edge: 14-15% of the calls shed in three runs, most in the slow
	// start's overrun before the first verdict, against 88% without the
	// limit; 14-20% against 68-73% in three runs under the race detector,
	// and once, beside the suite's parallel tests, 38% against 56%. How
	// much is shed is the bench's figure (the engine matrix's capacity
	// cells, docs/PERFORMANCE.md), measured where nothing else runs; this
	// test asserts that the limit sheds clearly less than no limit, a
	// quarter less at least, which a limit that does nothing fails.
	withShare, withoutShare := float64(with.Shed)/float64(with.Calls), float64(without.Shed)/float64(without.Calls)
	assert.Greater(t, withoutShare, 0.3, "without, the engine is overloaded")
	assert.Less(t, withShare, withoutShare*3/4, "the limit sheds a quarter less at least")
}
