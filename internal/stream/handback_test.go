package stream_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/topology"
)

// A read whose last attempt is cut short by the stop's deadline is handed
// back, not charged: the next process delivers it instead of
// dead-lettering it as exhausted.
func TestACutLastAttemptIsHandedBack(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	e := newEnv(t, func(n int, _ string) (int, http.Header) {
		if healthy.Load() {
			return http.StatusOK, nil
		}
		return http.StatusServiceUnavailable, nil
	})
	o := e.options(51)
	o.ShutdownTimeout = 300 * time.Millisecond
	budget := o.Policy.MaxAttempts
	e.re.setDelay(func(n int, _ string) time.Duration {
		if n == budget {
			return 3 * time.Second // the last attempt outlives the stop's deadline
		}
		return 0
	})
	stop := e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	require.Eventually(t, func() bool { return len(e.re.Calls(key1)) == budget }, 10*time.Second, time.Millisecond)
	stop()

	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_hand_backs_total")))
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_failures_total", "class", "transient", "cause", "shutdown")))
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "term")))

	healthy.Store(true)
	e.re.setDelay(nil)
	e.start(e.options(52))
	e.settled(10 * time.Second)
	assert.Empty(t, e.deadLetters(), "a stop is not the read's fault")
	calls := e.re.Calls(key1)
	require.Len(t, calls, budget+1)
	assert.Equal(t, http.StatusOK, calls[budget].Status)
}

// Reads held for the breaker are handed back at every stop; however many
// stops they see, none is dead-lettered for the delivery count those
// hand-backs raised. The budget counts calls to the downstream.
func TestStopsWhileTheBreakerHoldsAReadCostItNothing(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	e := newEnv(t, func(int, string) (int, http.Header) {
		if healthy.Load() {
			return http.StatusOK, nil
		}
		return http.StatusServiceUnavailable, nil
	})
	seq := e.publish("meter.reads.north", read("MTR-1", 1), nil)
	opened := func() opts {
		o := e.options(53)
		o.Breaker = &breaker.Options{Window: time.Minute, MinCalls: 1, FailureRatio: 0.5, CoolDown: time.Hour, MaxCoolDown: time.Hour, Probes: 3}
		openAtOnce(&o)
		return o
	}
	const stops = 6 // more than the budget of 4
	for i := range stops {
		stop := e.start(opened())
		// The read's call fails, the breaker opens, the read waits for it.
		require.Eventually(t, func() bool { return len(e.re.Calls(key1)) == i+1 }, 10*time.Second, time.Millisecond)
		stop()
	}
	// Nothing charged: each delivery's one call failed with the engine as
	// a whole, and a hand-back needs no record (none is written, or one
	// that counts no call).
	entry, err := e.set.Records.KV.Get(t.Context(), strconv.FormatUint(seq, 10))
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		require.NoError(t, err)
		var rec map[string]any
		require.NoError(t, json.Unmarshal(entry.Value(), &rec))
		assert.Zero(t, rec["calls"], "%s", entry.Value())
	}
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_hand_backs_total")), float64(stops))

	healthy.Store(true)
	e.start(e.options(54))
	e.settled(10 * time.Second)
	assert.Empty(t, e.deadLetters())
	assert.Equal(t, http.StatusOK, e.re.Calls(key1)[stops].Status)
}

// Held reads are kept alive until they are handed back, however long the
// stop takes: a stop longer than the ack wait must not let a held read be
// redelivered to another replica before its delay is over.
func TestHeldReadsStayAliveThroughALongStop(t *testing.T) {
	t.Parallel()
	const retryAfter = 4 * time.Second // under the policy's max server wait (5s)
	e := newEnvWith(t, func(n int, key string) (int, http.Header) {
		if key == key1 && n == 1 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {strconv.Itoa(int(retryAfter / time.Second))}}
		}
		return http.StatusOK, nil
	}, func(topo *topology.Topology) { topo.AckWait = 2 * time.Second })
	slowKey := "MTR-2@2026-11-30T06:02:00Z"
	e.re.setDelay(func(n int, key string) time.Duration {
		if key == slowKey {
			return 1400 * time.Millisecond // keeps the stop busy past the ack wait, within the call's share of the handler timeout
		}
		return 0
	})
	o := e.options(55)
	o.HandlerTimeout = 1800 * time.Millisecond
	stopA := e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	require.Eventually(t, func() bool { return len(e.re.Calls(key1)) == 1 }, 5*time.Second, time.Millisecond)
	// The slow read starts 0.8s later, so the stop it holds up ends past
	// the ack wait counted from the held read's last sign of life (a
	// timeline, not a wait for a condition).
	time.Sleep(800 * time.Millisecond)
	e.publish("meter.reads.north", read("MTR-2", 2), nil)
	require.Eventually(t, func() bool { return len(e.re.Calls(slowKey)) == 1 }, 5*time.Second, time.Millisecond)

	oB := e.options(56)
	oB.HandlerTimeout = 1800 * time.Millisecond
	e.start(oB) // another replica, pulling from the same durable
	stopA()
	e.settled(15 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 2)
	assert.GreaterOrEqual(t, calls[1].At.Sub(calls[0].At), retryAfter, "redelivered before its delay was over")
	assert.Empty(t, e.deadLetters())
}

// The breaker's cool-down timer is stopped with the consumer.
func TestTheBreakerStopsWithTheConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	var stopped atomic.Int64
	o := e.options(57)
	o.Breaker = &breaker.Options{Window: time.Minute, MinCalls: 1, FailureRatio: 0.5, CoolDown: time.Hour, MaxCoolDown: time.Hour, Probes: 3,
		AfterFunc: func(d time.Duration, f func()) func() {
			t := time.AfterFunc(d, f)
			return func() { stopped.Add(1); t.Stop() }
		}}
	openAtOnce(&o)
	stop := e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counterGauge(t, e, "meter_consumer_breaker_state")) == float64(breaker.Open)
	}, 10*time.Second, time.Millisecond)
	stop()
	assert.Equal(t, int64(1), stopped.Load())
}
