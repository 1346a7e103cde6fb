package stream_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
	"github.com/meterline/meter-consumer/internal/topology"
)

// keyOf is the idempotency key of read(fmt.Sprintf("MTR-%d", i), i).
func keyOf(i int) string { return fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i%60) }

// While everything fails, retries add at most the budget's share of the
// first attempts; a retry over it waits, held and kept alive, and is not
// charged: when the engine is back every read is delivered, none
// dead-lettered. Without the budget the same storm spends every read's
// attempts.
func TestTheRetryBudgetBoundsRetries(t *testing.T) {
	t.Parallel()
	const reads = 40
	run := func(t *testing.T, withBudget bool) (calls int, deadLetters int, storm time.Duration) {
		e, down := newOutageEnv(t, true)
		o := e.options(71)
		if withBudget {
			b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 0.5, Window: 10 * time.Second})
			require.NoError(t, err)
			o.Budget = b
		}
		e.start(o)
		began := time.Now()
		for i := range reads {
			e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		}
		// Every read tried at least once, and the storm given time to retry.
		require.Eventually(t, func() bool {
			for i := range reads {
				if len(e.re.Calls(keyOf(i))) == 0 {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond)
		time.Sleep(time.Second) // the length of the storm, not a wait for a condition
		calls, storm = e.re.total(), time.Since(began)
		down.Store(false)
		if withBudget {
			t.Logf("retries spent %v, denied %v in %s", testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "spent")),
				testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "denied")), storm)
			return calls, len(e.deadLetters()), storm
		}
		e.settled(20 * time.Second)
		return calls, len(e.deadLetters()), storm
	}
	t.Run("with a budget", func(t *testing.T) {
		calls, _, storm := run(t, true)
		// 10% of 40 first attempts, plus 0.5/s over a 10s window; and one
		// retry for each second of the storm: the budget binds while the
		// engine is overloaded, shedding within the last second, and once
		// the budget holds every retry, no call has been shed for a second
		// when the next one is due, which goes (and is shed at once).
		assert.LessOrEqual(t, calls, reads+4+5+int(storm/time.Second), "retries within the budget")
		assert.Greater(t, calls, reads, "retries are not forbidden, only bounded")
	})
	t.Run("without", func(t *testing.T) {
		calls, dead, _ := run(t, false)
		t.Logf("%d calls, %d dead-lettered", calls, dead)
		assert.Greater(t, calls, 2*reads, "every read spends its attempts on the storm")
	})
}

// Held over the budget, a read is not charged: once the engine is back,
// every read is delivered and none is dead-lettered.
func TestARetryOverTheBudgetIsNotCharged(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, true)
	o := e.options(72)
	b, err := budget.New(budget.Options{Ratio: 0.01, MinPerSecond: 5, Window: time.Second})
	require.NoError(t, err)
	o.Budget = b
	e.start(o)
	const reads = 20
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "denied")) > 0
	}, 10*time.Second, 5*time.Millisecond)
	down.Store(false)
	e.settled(20 * time.Second)
	assert.Empty(t, e.deadLetters(), "waiting for the budget cost no read an attempt")
	for i := range reads {
		calls := e.re.Calls(keyOf(i))
		require.NotEmpty(t, calls)
		assert.Equal(t, http.StatusOK, calls[len(calls)-1].Status)
		assert.LessOrEqual(t, len(calls), o.Policy.MaxAttempts)
	}
}

// Past its age limit a read that fails transiently is dead-lettered with
// reason expired, instead of retried until its attempts are spent.
func TestAReadPastItsAgeIsExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	o := e.options(73)
	o.Policy = retry.Policy{Base: 100 * time.Millisecond, Cap: 100 * time.Millisecond, MaxAttempts: 50}
	o.MaxReadAge = 300 * time.Millisecond
	e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "expired", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_503", dl[0].Header.Get("Dlq-Cause"))
	assert.Less(t, len(e.re.Calls(key1)), 50, "not retried until its attempts were spent")
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "expired")))
}

// When the workers are all waiting (here on a concurrency limit of one in
// front of a slow engine), pulled reads are parked, kept alive, rather than
// left to wait out the ack wait in the client buffer: none is redelivered.
func TestReadsWaitingForAWorkerAreKeptAlive(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, func(topo *topology.Topology) { topo.AckWait = 2 * time.Second })
	e.re.setLatency(250 * time.Millisecond)
	o := e.options(74)
	o.Concurrency, o.PullBatch, o.HandlerTimeout = 8, 8, 1500*time.Millisecond
	l, err := limit.New(limit.Options{Min: 1, Max: 1})
	require.NoError(t, err)
	o.Limiter = l
	e.start(o)
	const reads = 24 // six seconds of work, three ack waits
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	e.settled(30 * time.Second)
	for i := range reads {
		assert.Len(t, e.re.Calls(keyOf(i)), 1, "read %d was redelivered", i)
	}
	assert.Empty(t, e.deadLetters())
}

// With the adaptive limit on, the budget bounds retries only while the
// engine is overloaded: its sheds fall when the replica sends less (found
// by the engine's view in its dips). A healthy engine failing some reads
// (a 500 for each, once), or failing every read's first call whatever the
// load (a 503 for each, once: the reads' own, or a partial failure of the
// engine that no pacing cures), gets their retries at once.
func TestTheBudgetHoldsRetriesOnlyWhileTheEngineIsOverloaded(t *testing.T) {
	t.Parallel()
	budgetOf := func(t *testing.T) *budget.Budget {
		b, err := budget.New(budget.Options{Ratio: 0.01, MinPerSecond: 1, Window: 10 * time.Second})
		require.NoError(t, err)
		return b
	}
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprintf("%d once for every read: retried freely", status), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(n int, _ string) (int, http.Header) {
				if n == 1 {
					return status, nil
				}
				return http.StatusOK, nil
			})
			o := e.options(75)
			l, err := limit.New(limit.Options{Max: o.Concurrency})
			require.NoError(t, err)
			o.Budget, o.Limiter = budgetOf(t), l
			e.start(o)
			const reads = 30
			for i := range reads {
				e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
			}
			e.settled(10 * time.Second)
			assert.Empty(t, e.deadLetters())
			assert.Equal(t, 30.0, testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "spent")))
			assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "denied")))
		})
	}
	// An engine a replica overloads whatever it does (32 calls at once, no
	// adaptive limit to bring them down, against 2 servers and a queue of
	// 2) refuses most of what it is sent: its retries wait for the budget.
	// With the adaptive limit, the limit paces the retries alone until the
	// engine refuses most and a trial finds that its load (internal/engine's
	// TestADipTellsLoadFromTheReadsOwn).
	t.Run("an overloaded engine's retries wait for the budget", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		eng, err := simengine.New(simengine.Options{Servers: 2, ServiceTime: 10 * time.Millisecond, Queue: 2})
		require.NoError(t, err)
		srv := simengine.NewServer(eng)
		t.Cleanup(srv.Close)
		o := e.options(76)
		o.Concurrency, o.Policy.MaxAttempts = 32, 8
		sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Concurrency: 32})
		require.NoError(t, err)
		o.Sink = sink
		o.Budget = budgetOf(t)
		e.publishN(1000)
		e.start(o)
		require.Eventually(t, func() bool {
			return testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "denied")) > 0
		}, 10*time.Second, 5*time.Millisecond)
	})
}
