package stream_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// publishN publishes n reads, MTR-0 to MTR-n-1.
func (e *env) publishN(n int) {
	e.t.Helper()
	for i := range n {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
}

// adaptive adds the adaptive limit (32 calls) to o.
func adaptive(t *testing.T, o *opts) *limit.Limiter {
	t.Helper()
	l, err := limit.New(limit.Options{Max: 32})
	require.NoError(t, err)
	o.Concurrency, o.Limiter = 32, l
	return l
}

// A healthy engine whose latency spreads (uniform in 5-25ms, no queue)
// keeps the limit at its bound: the spread is the same at 1 call and at 32.
func TestASpreadingLatencyKeepsTheLimitUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := rand.New(rand.NewPCG(5, 25))
	var mu sync.Mutex
	e.re.setDelay(func(int, string) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return 5*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond)))
	})
	o := e.options(91)
	l := adaptive(t, &o)
	const reads = 1500
	e.publishN(reads)
	began := time.Now()
	e.start(o)
	e.settled(60 * time.Second)
	took := time.Since(began)
	t.Logf("%d reads in %s (%.0f/s), limit %d", reads, took, reads/took.Seconds(), l.Limit())
	assert.GreaterOrEqual(t, l.Limit(), 24, "the limit stays near its bound of 32")
	assert.Less(t, took, 10*time.Second, "at 32 calls of 15ms, about 2,000 reads a second")
}

// One read in four answered 429 with Retry-After: 2, once (an account over
// its quota): that read waits its own two seconds; the replica is not
// paused and every other read goes through.
func TestAPerAccountThrottleDoesNotPauseTheReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		if n == 1 && keyIndex(key)%4 == 0 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}
		}
		return http.StatusOK, nil
	})
	o := e.options(92)
	adaptive(t, &o)
	const reads = 80
	e.publishN(reads)
	began := time.Now()
	e.start(o)
	e.settled(20 * time.Second)
	t.Logf("settled in %s", time.Since(began))
	assert.Empty(t, e.logs.byMessage("the rate engine throttles broadly: calls paused"))
	for i := 1; i < reads; i += 4 {
		c := e.re.Calls(keyOf(i))
		require.NotEmpty(t, c)
		assert.Less(t, c[0].At.Sub(began), 2*time.Second, "read %d was not held behind the throttled ones", i)
	}
	for i := 0; i < reads; i += 4 {
		c := e.re.Calls(keyOf(i))
		require.Len(t, c, 2)
		assert.GreaterOrEqual(t, c[1].At.Sub(c[0].At), 2*time.Second, "its own Retry-After is the floor")
	}
}

func keyIndex(key string) int {
	var i int
	_, _ = fmt.Sscanf(key, "MTR-%d@", &i)
	return i
}

// A fifth of the reads answered 503 once by an engine that serves the rest
// at once: their retries are not held by the retry budget, whose floor is
// low, because the engine is not overloaded.
func TestReadsFailingOnceDoNotWaitOnTheRetryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		if n == 1 && keyIndex(key)%5 == 0 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	o := e.options(93)
	adaptive(t, &o)
	b, err := budget.New(budget.Options{Ratio: 0.01, MinPerSecond: 0.1, Window: 10 * time.Second})
	require.NoError(t, err)
	o.Budget = b
	const reads = 300
	e.publishN(reads)
	e.start(o)
	e.settled(20 * time.Second)
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "denied")))
	assert.Equal(t, 60.0, testutil.ToFloat64(counter(t, e, "meter_consumer_retries_total", "budget", "spent")))
	for i := 0; i < reads; i += 5 {
		c := e.re.Calls(keyOf(i))
		require.Len(t, c, 2)
		assert.Less(t, c[1].At.Sub(c[0].At), o.Policy.Base+time.Second, "read %d's retry waited its delay, not the budget", i)
	}
}

// A backlog holding a few reads that always fail: the breaker stays closed
// (a read failing again is evidence about that read), each of them is
// dead-lettered exhausted after exactly MaxAttempts calls, and the rest
// are billed.
func TestAFewReadsThatAlwaysFailAreTheirOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ int, key string) (int, http.Header) {
		if keyIndex(key)%30 == 0 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	o := e.options(94)
	adaptive(t, &o)
	o.Breaker = &breaker.Options{Window: 5 * time.Second, MinCalls: 20, FailureRatio: 0.5, CoolDown: time.Second, MaxCoolDown: time.Minute, Probes: 3}
	const reads = 300
	e.publishN(reads)
	e.start(o)
	e.settled(30 * time.Second)
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")))
	dl := e.deadLetters()
	assert.Len(t, dl, 10)
	for _, m := range dl {
		assert.Equal(t, "exhausted", m.Header.Get("Dlq-Reason"))
	}
	for i := 0; i < reads; i += 30 {
		assert.Len(t, e.re.Calls(keyOf(i)), o.Policy.MaxAttempts, "read %d", i)
	}
}

// A single Retry-After of a day pauses nothing: it is that read's floor,
// clamped to MaxServerWait.
func TestADayOfRetryAfterIsClampedAndPausesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		if n == 1 && keyIndex(key) == 0 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {"86400"}}
		}
		return http.StatusOK, nil
	})
	o := e.options(95)
	o.Policy.MaxServerWait = 500 * time.Millisecond
	adaptive(t, &o)
	const reads = 50
	e.publishN(reads)
	e.start(o)
	e.settled(10 * time.Second)
	assert.Empty(t, e.logs.byMessage("the rate engine throttles broadly: calls paused"))
	c := e.re.Calls(keyOf(0))
	require.Len(t, c, 2)
	gap := c[1].At.Sub(c[0].At)
	assert.GreaterOrEqual(t, gap, 500*time.Millisecond)
	assert.Less(t, gap, 3*time.Second, "clamped to max_server_wait, not a day")
}

// An engine overloaded by a replica that calls it 32 at a time (no limit)
// sheds most calls at once: those sheds are the engine's state, not the
// reads', and cost no read an attempt: none is dead-lettered, though each
// read has only three.
func TestShedsOfAnOverloadedEngineAreNotCharged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	eng, err := simengine.New(simengine.Options{Servers: 2, ServiceTime: 10 * time.Millisecond})
	require.NoError(t, err)
	srv := simengine.NewServer(eng)
	t.Cleanup(srv.Close)
	o := e.options(96)
	o.Concurrency, o.Policy.MaxAttempts = 32, 3
	sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Concurrency: 32})
	require.NoError(t, err)
	o.Sink = sink
	const reads = 300
	e.publishN(reads)
	e.start(o)
	e.settled(60 * time.Second)
	s := eng.Stats()
	t.Logf("%d calls, %d shed, %d billed", s.Calls, s.Shed, s.Billed)
	assert.Greater(t, float64(s.Shed), 0.5*float64(s.Calls), "the engine was overloaded")
	assert.Empty(t, e.deadLetters(), "no read paid for the overload")
	assert.EqualValues(t, reads, s.Billed)
	assert.Positive(t, testutil.ToFloat64(counter(t, e, "meter_consumer_uncharged_failures_total", "why", "shedding")))
	// Each shed is one failure, credited or not (a credited shed was
	// counted twice before).
	assert.EqualValues(t, s.Shed, testutil.ToFloat64(counter(t, e, "meter_consumer_failures_total", "class", "transient", "cause", "http_503")))
}

// An engine down from the start, with too few fresh reads in a read's
// attempt limit for the breaker to open (20 in its window, 40 reads a
// second, four attempts within 280ms): a read's last failure while the
// engine serves no one and fails other reads too is the outage's, not the
// read's. No read is dead-lettered; every read is billed once it is back.
func TestAnEngineDownBeforeTheBreakerOpensDeadLettersNothing(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, true)
	o := e.options(97)
	o.Breaker = &breaker.Options{Window: 30 * time.Second, MinCalls: 20, FailureRatio: 0.5, CoolDown: 500 * time.Millisecond, MaxCoolDown: time.Minute, Probes: 1}
	e.start(o)
	const reads = 50
	for i := range reads {
		if i == 40 {
			down.Store(false)
		}
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		if i >= 2 { // the first three at once: others' first attempts fail beside the first read's
			time.Sleep(25 * time.Millisecond)
		}
	}
	e.settled(30 * time.Second)
	assert.Empty(t, e.deadLetters(), "no read paid for the outage")
	for i := range reads {
		c := e.re.Calls(keyOf(i))
		require.NotEmpty(t, c, "read %d", i)
		assert.Equal(t, http.StatusOK, c[len(c)-1].Status, "read %d billed", i)
	}
	assert.Positive(t, testutil.ToFloat64(counter(t, e, "meter_consumer_uncharged_failures_total", "why", "engine_down")))
	t.Logf("%d calls for %d reads", e.re.total(), reads)
}

// An engine that refuses every call from the replica's start is not
// called again the moment it refuses: until it answers once, each refused
// slot is kept 1ms, doubling up to 10ms (package limit), so before the
// breaker opens the replica calls it no more than a hundred times a second,
// where it called it each time a read could be fetched (2,339 times in the
// second before the breaker opened).
// The reads are billed once it is back.
func TestAnEngineDownFromTheStartIsNotCalledAtOnceAgain(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, true)
	o := e.options(53)
	adaptive(t, &o)
	o.Breaker = &breaker.Options{Window: 30 * time.Second, MinCalls: 20, FailureRatio: 0.5, CoolDown: 500 * time.Millisecond, MaxCoolDown: time.Minute, Probes: 1}
	started := time.Now()
	e.start(o)
	const reads = 200
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	require.Eventually(t, func() bool {
		return e.metric("meter_consumer_breaker_transitions_total", "to", "open") > 0
	}, 10*time.Second, time.Millisecond, "the breaker opens on the silent engine")
	calls, elapsed := e.re.total(), time.Since(started)
	// One slot (nothing answered grows the limit), kept 1+2+4+8ms and then
	// 10ms after each refusal: timers fire late, never early.
	assert.LessOrEqual(t, calls, int(elapsed/(10*time.Millisecond))+5, "%d calls in %s", calls, elapsed)
	down.Store(false)
	e.settled(30 * time.Second)
	assert.Empty(t, e.deadLetters())
	t.Logf("%d calls in the %s before the breaker opened", calls, elapsed)
}

func TestOutageHoldsReadsInsteadOfDeadLettering(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, true)
	o := e.options(41)
	o.Breaker = &breaker.Options{Window: time.Second, MinCalls: 5, FailureRatio: 0.5,
		CoolDown: 200 * time.Millisecond, MaxCoolDown: 400 * time.Millisecond, Probes: 1}
	e.start(o)

	// The whole retry budget (40ms+80ms+160ms ceilings) is under 300ms; the
	// outage lasts ten times that, with reads arriving throughout.
	var keys []string
	began := time.Now()
	for i := 0; time.Since(began) < 3*time.Second; i++ {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		keys = append(keys, fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i%60))
		time.Sleep(20 * time.Millisecond)
	}
	// Open, or half-open while a probe is out (a probe is all it sends):
	// not closed, which only an answered probe does.
	assert.NotEqual(t, float64(breaker.Closed), testutil.ToFloat64(counterGauge(t, e, "meter_consumer_breaker_state")), "not closed at the end of the outage")
	down.Store(false)
	e.settled(20 * time.Second)

	e.ledgerDelivered(keys, func(c simengine.Call) bool { return c.Status == http.StatusOK })
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "exhausted")))
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")), 1.0)
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "closed")), 1.0)
	assert.Equal(t, float64(breaker.Closed), testutil.ToFloat64(counterGauge(t, e, "meter_consumer_breaker_state")))
	// The downstream saw a trickle of probes during the outage, not every read on every attempt.
	t.Logf("%d reads, %d downstream calls", len(keys), e.re.total())
}

func TestPermanentFailuresDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	o := e.options(42)
	o.Breaker = &breaker.Options{Window: time.Second, MinCalls: 3, FailureRatio: 0.5, CoolDown: time.Second, MaxCoolDown: time.Minute, Probes: 1}
	e.start(o)
	for i := range 20 {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	e.settled(10 * time.Second)
	assert.Len(t, e.deadLetters(), 20)
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")))
}

// Back from an outage long enough to open the breaker, an engine that
// fails a tenth of the reads once, on their own, has them charged: what
// the replica saw refused while the engine served no one says nothing of
// its load after. Kept, the outage's refusals were most of the first
// attempts the engine's view had seen, so it judged the engine to refuse
// most of what it is sent, and credited each read's own failure as the
// engine's load, bringing the limit down on it.
func TestAnOutagesRefusalsAreForgottenOnTheReturn(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	var failed sync.Map // the reads failed since the return
	e := newEnv(t, func(_ int, key string) (int, http.Header) {
		if down.Load() {
			return http.StatusServiceUnavailable, nil
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		if _, again := failed.LoadOrStore(key, true); h.Sum32()%10 == 0 && !again {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	o := e.options(61)
	adaptive(t, &o)
	// The breaker opens once 60 fresh reads have failed: the view has seen
	// more first attempts refused by then than a trial needs.
	o.Breaker = &breaker.Options{Window: 30 * time.Second, MinCalls: 60, FailureRatio: 0.5,
		CoolDown: 200 * time.Millisecond, MaxCoolDown: 400 * time.Millisecond, Probes: 1}
	e.start(o)

	i := 0
	publish := func(d time.Duration) {
		for began := time.Now(); time.Since(began) < d; i++ {
			e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
			time.Sleep(10 * time.Millisecond)
		}
	}
	for e.metric("meter_consumer_breaker_transitions_total", "to", "open") < 1 {
		require.Less(t, i, 1000, "the breaker opens on the outage")
		publish(100 * time.Millisecond)
	}
	down.Store(false)
	require.Eventually(t, func() bool {
		return e.metric("meter_consumer_breaker_state") == float64(breaker.Closed)
	}, 10*time.Second, 10*time.Millisecond, "the breaker closes on the return")
	credited := e.metric("meter_consumer_uncharged_failures_total", "why", "shedding")
	publish(3 * time.Second)
	e.settled(20 * time.Second)

	assert.Equal(t, credited, e.metric("meter_consumer_uncharged_failures_total", "why", "shedding"),
		"a read's own failure after the return is not credited as the engine's load")
	t.Logf("%d reads, %d calls; credited as shedding before the return %.0f; %d dead-lettered", i, e.re.total(), credited, len(e.deadLetters()))
}
