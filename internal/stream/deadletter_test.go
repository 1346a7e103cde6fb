package stream_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnconfirmedCopyLeavesOriginalUnsettled(t *testing.T) {
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	require.NoError(t, e.js.DeleteStream(t.Context(), e.topo.DLQStream))
	e.start(e.options(11))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)

	// The copy cannot be stored: the original stays ack-pending, NAKed again
	// and again, never terminated.
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letter_publish_errors_total")) >= 3
	}, 20*time.Second, 10*time.Millisecond)
	info, err := e.cons.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, info.NumAckPending+int(info.NumPending), "the original is not let go")
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "term")))

	// The dead-letter stream comes back: exactly one copy, with the reason
	// and cause first decided, and the original is terminated.
	_, err = e.js.CreateOrUpdateStream(t.Context(), e.topo.DLQStreamConfig())
	require.NoError(t, err)
	e.settled(20 * time.Second)
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "permanent", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_422", dl[0].Header.Get("Dlq-Cause"))
	assert.Len(t, e.re.callsFor(key1), 1, "the downstream is not asked again while only the copy is missing")
}

func TestCrashBetweenCopyAndTermYieldsOneCopy(t *testing.T) {
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	seq := e.publish("meter.reads.north", read("MTR-1", 1), nil)

	// A previous process stored the copy, then died before its TERM.
	pub := dlq.NewPublisher(e.js, dlq.PublisherOptions{Prefix: e.topo.DLQPrefix, Stream: e.topo.DLQStream})
	require.NoError(t, pub.Publish(t.Context(), dlq.Entry{
		Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: e.topo.Stream, Consumer: e.topo.Durable,
		Subject: "meter.reads.north", Sequence: seq, Deliveries: 1, Data: []byte(read("MTR-1", 1)),
	}))

	e.start(e.options(12))
	e.settled(10 * time.Second)
	assert.Len(t, e.deadLetters(), 1, "the redelivery's copy is a duplicate of the first")
}

func TestPanicIsTransientAndTheServiceSurvives(t *testing.T) {
	e := newEnv(t, nil)
	o := e.options(13)
	http := o.Sink
	o.Sink = downstream.SinkFunc(func(ctx context.Context, r meter.Read) error {
		if r.MeterID == "MTR-PANIC" {
			panic("rate table missing")
		}
		return http.Deliver(ctx, r)
	})
	e.start(o)
	e.publish("meter.reads.north", read("MTR-PANIC", 1), nil)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	assert.Len(t, e.re.callsFor(key1), 1, "good reads keep flowing")
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "panic", dl[0].Header.Get("Dlq-Cause"))
	assert.Contains(t, dl[0].Header.Get("Dlq-Error"), "rate table missing")
	assert.Equal(t, float64(o.Policy.MaxAttempts), testutil.ToFloat64(counter(t, e, "meter_consumer_panics_total")))
}

func TestPastBudgetIsDeadLetteredWithoutCallingDownstream(t *testing.T) {
	e := newEnv(t, nil)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)

	// Burn the budget without settling, as crashed replicas would.
	o := e.options(14)
	for range o.Policy.MaxAttempts {
		batch, err := e.cons.Fetch(1, jetstreamFetchWait())
		require.NoError(t, err)
		for m := range batch.Messages() {
			require.NoError(t, m.Nak())
		}
	}
	e.start(o)
	e.settled(10 * time.Second)
	assert.Empty(t, e.re.callsFor(key1))
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "unsettled", dl[0].Header.Get("Dlq-Cause"))
}
