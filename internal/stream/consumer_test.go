package stream_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
	"github.com/meterline/meter-consumer/internal/stream"
)

const key1 = "MTR-1@2026-11-30T06:01:00Z"

func TestSuccessIsAckedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(e.options(1))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 1)
	var body map[string]any
	require.NoError(t, json.Unmarshal(calls[0].Body, &body))
	assert.Equal(t, map[string]any{
		"meter_id": "MTR-1", "read_at": "2026-11-30T06:01:00Z", "quantity": "12.500",
		"unit": "kWh", "idempotency_key": key1,
	}, body)
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "ack")))
	assert.Empty(t, e.deadLetters())
}

func TestTransientTwiceThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, _ string) (int, http.Header) {
		if n <= 2 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	const seed = 42
	e.start(e.options(seed))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 3, "two 503s then a success: three deliveries")

	// The delays asked for are the policy's draws for attempts 1 and 2, from
	// the same seed.
	p, r := testPolicy(), retry.NewRand(seed)
	want := []time.Duration{p.Delay(1, r), p.Delay(2, r)}
	assert.Equal(t, want, e.logs.delays())
	for i, d := range want {
		gap := calls[i+1].At.Sub(calls[i].At)
		assert.GreaterOrEqual(t, gap, d, "redelivery %d came before its delay", i+1)
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "nak")))
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_failures_total", "class", "transient", "cause", "http_503")))
	assert.Empty(t, e.deadLetters())
}

func TestRetryAfterIsAFloor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, _ string) (int, http.Header) {
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}
		}
		return http.StatusOK, nil
	})
	e.start(e.options(7))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 2)
	assert.GreaterOrEqual(t, calls[1].At.Sub(calls[0].At), 2*time.Second)
	assert.Equal(t, []time.Duration{2 * time.Second}, e.logs.delays())
}

func TestPermanentFailuresAreDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	e.start(e.options(3))
	seq422 := e.publish("meter.reads.north", read("MTR-1", 1), nats.Header{"Nats-Msg-Id": {"head-end-1"}, "X-Head-End": {"he-7"}})
	seqBad := e.publish("meter.reads.south", `{"meter_id":"MTR-2","read_at":"2026-11-30T07:00:00","quantity":"1","unit":"kWh"}`, nil)
	e.settled(10 * time.Second)

	dl := e.deadLetters()
	require.Len(t, dl, 2)
	bySeq := map[string]int{}
	for i, m := range dl {
		bySeq[m.Header.Get("Dlq-Sequence")] = i
	}
	m := dl[bySeq[strconv.FormatUint(seq422, 10)]]
	assert.Equal(t, "meter.dlq.meter.reads.north", m.Subject)
	assert.Equal(t, read("MTR-1", 1), string(m.Data), "payload is the original bytes")
	assert.Equal(t, "permanent", m.Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_422", m.Header.Get("Dlq-Cause"))
	assert.Contains(t, m.Header.Get("Dlq-Error"), "422")
	assert.Equal(t, "METER_READS", m.Header.Get("Dlq-Stream"))
	assert.Equal(t, "meter-consumer", m.Header.Get("Dlq-Consumer"))
	assert.Equal(t, "meter.reads.north", m.Header.Get("Dlq-Subject"))
	assert.Equal(t, "1", m.Header.Get("Dlq-Deliveries"))
	assert.Equal(t, "head-end-1", m.Header.Get("Dlq-Original-Msg-Id"))
	assert.Equal(t, "he-7", m.Header.Get("X-Head-End"))
	published, err := time.Parse(time.RFC3339Nano, m.Header.Get("Dlq-Published-At"))
	require.NoError(t, err)
	assert.Equal(t, "dlq:METER_READS:"+strconv.FormatUint(seq422, 10)+":"+strconv.FormatInt(published.UnixNano(), 10), m.Header.Get("Nats-Msg-Id"))
	for _, h := range []string{"Dlq-Published-At", "Dlq-Dead-Lettered-At"} {
		ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(h))
		require.NoError(t, err, h)
		assert.Equal(t, time.UTC, ts.Location(), h)
		assert.WithinDuration(t, time.Now(), ts, time.Minute, h)
	}

	bad := dl[bySeq[strconv.FormatUint(seqBad, 10)]]
	assert.Equal(t, "meter.dlq.meter.reads.south", bad.Subject)
	assert.Equal(t, "permanent", bad.Header.Get("Dlq-Reason"))
	assert.Equal(t, "invalid_payload", bad.Header.Get("Dlq-Cause"))
	assert.Contains(t, bad.Header.Get("Dlq-Error"), "read_at")

	assert.Len(t, e.re.Calls(key1), 1, "a 422 is not retried")
	assert.Equal(t, 1, e.re.total(), "an invalid read never reaches the downstream")
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "permanent")))
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "term")))
}

func TestAlwaysTransientIsExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	o := e.options(5)
	e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	assert.Len(t, e.re.Calls(key1), o.Policy.MaxAttempts, "delivered exactly max_attempts times")
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_503", dl[0].Header.Get("Dlq-Cause"))
	assert.Equal(t, strconv.Itoa(o.Policy.MaxAttempts), dl[0].Header.Get("Dlq-Deliveries"))
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "exhausted")))
}

// A trace started at the head-end reaches the rate engine: the message's
// traceparent goes on the POST.
func TestTheTraceparentGoesOnToTheEngine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(e.options(3))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e.publish("meter.reads.north", read("MTR-1", 1), nats.Header{"traceparent": {tp}})
	e.publish("meter.reads.north", read("MTR-2", 2), nil)
	e.settled(10 * time.Second)
	assert.Equal(t, tp, e.re.Calls(key1)[0].Header.Get("Traceparent"))
	assert.Empty(t, e.re.Calls("MTR-2@2026-11-30T06:02:00Z")[0].Header.Get("Traceparent"))
}

// ledger asserts every published key reached the downstream with a 2xx at
// least once and nothing was dead-lettered.
func (e *env) ledgerDelivered(keys []string, ok func(simengine.Call) bool) {
	e.t.Helper()
	for _, k := range keys {
		calls := e.re.Calls(k)
		delivered := false
		for _, c := range calls {
			delivered = delivered || ok(c)
		}
		assert.True(e.t, delivered, "read %s was never delivered", k)
	}
	assert.Empty(e.t, e.deadLetters())
}

func TestShutdownWithReadsInFlightLosesNone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		latency  time.Duration
		shutdown time.Duration
	}{
		{"in-flight reads finish", 200 * time.Millisecond, 5 * time.Second},
		{"past the deadline reads go back", 2 * time.Second, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.re.setLatency(tt.latency)
			o := e.options(21)
			o.ShutdownTimeout = tt.shutdown
			o.HandlerTimeout = 3 * time.Second
			stop := e.start(o)

			var keys []string
			for i := range 30 {
				e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
				keys = append(keys, fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i))
			}
			require.Eventually(t, func() bool { return e.re.total() >= 8 }, 10*time.Second, time.Millisecond)
			began := time.Now()
			stop()
			assert.Less(t, time.Since(began), tt.shutdown+2*time.Second, "shutdown is bounded")

			e.re.setLatency(0)
			e.start(e.options(22))
			e.settled(15 * time.Second)
			e.ledgerDelivered(keys, func(c simengine.Call) bool { return c.Status == http.StatusOK })
		})
	}
}

// The pull requests the server gets while a backlog drains: the first
// asks for the batch, every refill for the batch less the at most
// RefillAt-1 reads still in the client buffer, never more than the batch.
// With nats.go's default threshold (half the batch) the refills would ask
// for 17 of 32.
func TestRefillsAskForAllButOneReadPerWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var mu sync.Mutex
	var batches []int
	sub, err := e.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+e.topo.Stream+"."+e.topo.Durable, func(m *nats.Msg) {
		var req struct {
			Batch int `json:"batch"`
		}
		if json.Unmarshal(m.Data, &req) == nil {
			mu.Lock()
			batches = append(batches, req.Batch)
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, e.nc.Flush())

	const n = 600
	for i := range n {
		e.publish("meter.reads.m1", read("m1", i), nil)
	}
	o := e.options(1)
	o.PullBatch = 32 // Concurrency 8: refills at fewer than 8 buffered
	e.start(o)
	e.settled(30 * time.Second)
	require.Equal(t, n, e.re.total())

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(batches), n/32, "every read was pulled: %v", batches)
	assert.Equal(t, 32, batches[0], "the first pull asks for the batch")
	low := 32 - (stream.RefillAt(32, 8) - 1)
	for i, b := range batches {
		assert.True(t, b >= low && b <= 32, "pull %d asked for %d, not %d-32: %v", i, b, low, batches)
	}
	assert.LessOrEqual(t, len(batches), n/low+3, "pull requests for %d reads: %v", n, batches)
}
