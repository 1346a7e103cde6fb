package stream_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// TestAnOutageAfterAWallClockStepStillOpensTheBreaker: the wall clock steps
// back a minute (NTP, an operator) after the breaker's window has filled,
// then the engine fails every call. The breaker's window runs on the
// monotonic clock, so it opens and holds the reads; on the wall clock every
// outcome after the step fell in a slot "already gone", the breaker stayed
// closed, and the reads spent their attempts and were dead-lettered as
// exhausted.
func TestAnOutageAfterAWallClockStepStillOpensTheBreaker(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, false)
	clk := clock.NewStepping()
	o := e.options(43)
	o.Clock = clk
	// A low ratio: the successes still in the window when the engine goes
	// down do not delay the opening past the first reads' attempts.
	o.Breaker = &breaker.Options{Window: time.Second, MinCalls: 5, FailureRatio: 0.1,
		CoolDown: 200 * time.Millisecond, MaxCoolDown: 400 * time.Millisecond, Probes: 1}
	e.start(o)

	var keys []string
	publish := func(d, every time.Duration) {
		for began := time.Now(); time.Since(began) < d; {
			i := len(keys)
			e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
			keys = append(keys, fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i%60))
			time.Sleep(every)
		}
	}
	// Served reads for longer than the window: every slot is recent.
	publish(1200*time.Millisecond, 50*time.Millisecond)
	e.settled(10 * time.Second)
	clk.Step(-time.Minute)
	down.Store(true)
	publish(1500*time.Millisecond, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")) >= 1
	}, 10*time.Second, 10*time.Millisecond, "the breaker never opened")
	down.Store(false)
	e.settled(20 * time.Second)

	e.ledgerDelivered(keys, func(c simengine.Call) bool { return c.Status == http.StatusOK })
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "exhausted")))
}

// TestAHeldReadWaitsOutItsDelayWhateverTheWallClockDoes: a read held for a
// 1s retry delay when the wall clock steps back a minute is retried after
// its 1s: held reads are timed by the monotonic clock. Timed by the wall
// clock, its next keep-alive and its NAK were a minute away: its lease ran
// out and the server redelivered it after the ack wait, under a delivery
// still held (and NAKed a minute later).
func TestAHeldReadWaitsOutItsDelayWhateverTheWallClockDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, _ string) (int, http.Header) {
		if n == 1 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": []string{"1"}}
		}
		return http.StatusOK, nil
	})
	clk := clock.NewStepping()
	o := e.options(44)
	o.Clock = clk
	e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counterGauge(t, e, "meter_consumer_retry_held")) == 1
	}, 5*time.Second, time.Millisecond)
	clk.Step(-time.Minute)
	e.settled(10 * time.Second)
	calls := e.re.Calls("MTR-1@2026-11-30T06:01:00Z")
	require.Len(t, calls, 2)
	assert.Equal(t, http.StatusOK, calls[1].Status)
	assert.Less(t, calls[1].At.Sub(calls[0].At), e.topo.AckWait, "retried after its delay, not redelivered after the ack wait")
}
