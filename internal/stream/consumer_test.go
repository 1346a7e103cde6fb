package stream_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
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
