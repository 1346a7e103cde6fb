package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnconfirmedCopyLeavesOriginalUnsettled(t *testing.T) {
	t.Parallel()
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
	assert.Len(t, e.re.Calls(key1), 1, "the downstream is not asked again while only the copy is missing")
}

func TestCrashBetweenCopyAndTermYieldsOneCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	seq := e.publish("meter.reads.north", read("MTR-1", 1), nil)

	// A previous process stored the copy, then died before its TERM.
	pub := dlq.NewPublisher(e.js, dlq.PublisherOptions{Prefix: e.topo.DLQPrefix, Stream: e.topo.DLQStream})
	require.NoError(t, pub.Publish(t.Context(), dlq.Entry{
		Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: e.topo.Stream, Consumer: e.topo.Durable,
		Subject: "meter.reads.north", Sequence: seq, Deliveries: 1, Data: []byte(read("MTR-1", 1)),
		PublishedAt: storedAt(t, e, seq),
	}))

	e.start(e.options(12))
	e.settled(10 * time.Second)
	assert.Len(t, e.deadLetters(), 1, "the redelivery's copy is a duplicate of the first")
}

func TestPanicIsTransientAndTheServiceSurvives(t *testing.T) {
	t.Parallel()
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

	assert.Len(t, e.re.Calls(key1), 1, "good reads keep flowing")
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "panic", dl[0].Header.Get("Dlq-Cause"))
	assert.Contains(t, dl[0].Header.Get("Dlq-Error"), "rate table missing")
	assert.Equal(t, float64(o.Policy.MaxAttempts), testutil.ToFloat64(counter(t, e, "meter_consumer_panics_total")))
}

// Deliveries that reached no call (here NAKed by hand, as a replica that
// crashed before its call, or lost them when it stopped pulling, would
// leave them) are not attempts: the read is called, whatever its delivery
// count, up to MaxUncalled of them.
func TestDeliveriesWithoutACallAreNotAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	o := e.options(13)
	e.nakUncalled(stream.MaxUncalled, 1)
	e.start(o)
	e.settled(10 * time.Second)
	calls := e.re.Calls(key1)
	require.Len(t, calls, 1)
	assert.Equal(t, http.StatusOK, calls[0].Status)
	assert.Empty(t, e.deadLetters())
}

// Past MaxUncalled deliveries without a call, the rest count as attempts:
// a read whose deliveries keep being cut short before their call still ends
// in the dead-letter stream, without a call.
func TestPastTheBoundOfDeliveriesWithoutACallIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	o := e.options(14)
	e.nakUncalled(stream.MaxUncalled+o.Policy.MaxAttempts, 1)
	e.start(o)
	e.settled(10 * time.Second)
	assert.Empty(t, e.re.Calls(key1))
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "unsettled", dl[0].Header.Get("Dlq-Cause"))
	assert.Equal(t, strconv.Itoa(o.Policy.MaxAttempts), dl[0].Header.Get("Dlq-Attempts"), "the deliveries past the bound spent them")
	assert.Equal(t, strconv.Itoa(stream.MaxUncalled+o.Policy.MaxAttempts+1), dl[0].Header.Get("Dlq-Deliveries"))
}

// A read whose last shed awaits a trial's verdict on its record, the
// trial's span long past (no verdict came: its replica stopped, say), is
// dead-lettered on its next delivery with the decision awaited, without
// another call: its copy says it spent its attempts, the shed among them.
// The record is read back from the records bucket of a real server.
func TestAReadAwaitingAVerdictPastTheTrialsSpanIsDeadLetteredWithoutACall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seq := e.publish("meter.reads.north", read("MTR-1", 1), nil)
	o := e.options(15)
	e.nakUncalled(o.Policy.MaxAttempts, 1) // the deliveries of its calls: three charged, the last one's shed credited
	rec, err := json.Marshal(map[string]any{"calls": o.Policy.MaxAttempts - 1, "counts_calls": true, "sheds": 1,
		"published_at": e.publishedAt(e.js, seq),
		"awaiting": map[string]any{"reason": "exhausted", "class": "transient", "cause": "http_503",
			"error": "http_503: downstream answered 503 Service Unavailable", "at": time.Now().Add(-time.Minute)}})
	require.NoError(t, err)
	_, err = e.set.Records.KV.Put(t.Context(), strconv.FormatUint(seq, 10), rec)
	require.NoError(t, err)
	e.start(o)
	e.settled(10 * time.Second)
	assert.Empty(t, e.re.Calls(key1), "no call past the awaited shed")
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_503", dl[0].Header.Get("Dlq-Cause"))
	assert.Equal(t, strconv.Itoa(o.Policy.MaxAttempts), dl[0].Header.Get("Dlq-Attempts"), "the awaited shed was its last attempt")
}

// A read whose every POST is answered with a redirect is never acked: the
// redirect is not followed (its target answers 200 to a GET), and the read
// ends as a transient failure with cause redirect.
func TestARedirectIsNeverADelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) {
		return http.StatusFound, http.Header{"Location": {"/login"}}
	})
	e.start(e.options(61))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "ack")))
	// Only POSTs reach the engine (it takes nothing else as a call), and
	// nothing else did: no GET of the login page.
	assert.Equal(t, len(e.re.Calls(key1)), e.re.total())
	assert.Zero(t, e.re.Stats().BadRequests, "and nothing else: no GET of the login page")
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "redirect", dl[0].Header.Get("Dlq-Cause"))
	assert.Contains(t, dl[0].Header.Get("Dlq-Error"), "/login")
}

// A copy the dead-letter stream refuses for good (here: full, discard new)
// is counted and retried with delays that grow and never drop below half
// their ceiling: no tight loop, and the original is not let go.
func TestARejectedCopyIsRetriedSlowly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	cfg := e.topo.DLQStreamConfig()
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	_, err := e.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	e.publish("meter.reads.north", read("MTR-0", 0), nil) // fills the dead-letter stream
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.start(e.options(62))

	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letter_rejections_total")) >= 4
	}, 20*time.Second, 10*time.Millisecond)
	p := testPolicy()
	var rejected []time.Duration
	for _, r := range e.logs.byMessage("dead-letter copy rejected by the server; read NAKed, not terminated, until the cause is fixed") {
		rejected = append(rejected, r.duration("delay"))
		n := r.uint("deliveries")
		assert.GreaterOrEqual(t, r.duration("delay"), p.Ceiling(n)/2, "delivery %d", n)
		assert.LessOrEqual(t, r.duration("delay"), p.Ceiling(n), "delivery %d", n)
	}
	require.GreaterOrEqual(t, len(rejected), 4)
	assert.Len(t, e.deadLetters(), 1)
	info, err := e.cons.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, info.NumAckPending+int(info.NumPending), "the original is not let go")

	cfg.MaxMsgs = -1
	_, err = e.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	e.settled(20 * time.Second)
	assert.Len(t, e.deadLetters(), 2)
}

// Past the dead-letter stream's duplicate window a copy's message id no
// longer guards against a second copy: a read whose copy was stored but
// whose TERM was lost is looked for, and terminated without a second copy.
func TestNoSecondCopyPastTheDuplicateWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	cfg := e.topo.DLQStreamConfig()
	cfg.Duplicates = 200 * time.Millisecond
	_, err := e.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	o := e.options(63)
	o.Policy.Base, o.Policy.Cap = time.Second, time.Second // the copy is tried again past the window
	o.DeadLetterWindow = cfg.Duplicates
	o.DeadLetterRetry = retry.Policy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 1}
	pub := o.DeadLetter
	var first atomic.Bool
	o.DeadLetter = lostAck{pub, &first}
	e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(15 * time.Second)

	assert.Len(t, e.deadLetters(), 1, "one copy, though the first answer was lost")
	assert.Len(t, e.re.Calls(key1), 1, "the downstream was asked once")
	assert.Len(t, e.logs.byMessage("dead-lettered"), 1)
	st, err := e.js.Stream(t.Context(), e.topo.DLQStream)
	require.NoError(t, err)
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	assert.Zero(t, info.State.Consumers, "the look-up's consumer is deleted after use, not left to expire")
}

// storedAt is the stream timestamp of the read at seq.
func storedAt(t *testing.T, e *env, seq uint64) time.Time {
	t.Helper()
	st, err := e.js.Stream(t.Context(), e.topo.Stream)
	require.NoError(t, err)
	m, err := st.GetMsg(t.Context(), seq)
	require.NoError(t, err)
	return m.Time
}

// lostAck stores the first copy but reports it as not confirmed, as a lost
// ack would.
type lostAck struct {
	stream.DeadLetterer
	done *atomic.Bool
}

func (l lostAck) Publish(ctx context.Context, e dlq.Entry) error {
	if err := l.DeadLetterer.Publish(ctx, e); err != nil || l.done.Swap(true) {
		return err
	}
	return fmt.Errorf("%w: the ack was lost", dlq.ErrPublish)
}

// A call that takes all the time it may (the engine never answers) still
// leaves its read settled with its real cause: the handler timeout keeps
// a reserve (SettleReserve) for the record and the copy, so the read is
// dead-lettered "exhausted" by the timeout at its last attempt, on that
// delivery, not "unsettled" at the next.
func TestACallThatSpendsItsWholeTimeoutIsSettledWithItsCause(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.re.setDelay(func(int, string) time.Duration { return 5 * time.Second })
	o := e.options(15)
	o.Policy.MaxAttempts = 1
	o.HandlerTimeout = 600 * time.Millisecond
	e.start(o)
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	require.Len(t, e.re.Calls(key1), 1)
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, "timeout", dl[0].Header.Get("Dlq-Cause"), "its real cause")
	assert.Equal(t, "1", dl[0].Header.Get("Dlq-Deliveries"), "settled on the delivery whose call timed out")
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letter_publish_errors_total")))
}

// A read billed whose ack was lost comes back; an engine that answers its
// repeated key with 409 Conflict and Already-Billed: true (docs/CONTRACT.md)
// has billed it: the read is acked, not dead-lettered, even where 409 is a
// permanent status. A 409 without the header (the key in use) is a failure.
func TestAlreadyBilledIsAcked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		switch {
		case key == key1 && n == 1:
			return http.StatusOK, nil // billed; the ack is lost below
		case key == key1:
			return http.StatusConflict, http.Header{"Already-Billed": {"true"}}
		}
		return http.StatusConflict, nil
	})
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	// The first delivery is billed but never acked (a crash after the call).
	batch, err := e.cons.Fetch(1, jetstreamFetchWait())
	require.NoError(t, err)
	for m := range batch.Messages() {
		rd, err := meter.Decode(m.Data())
		require.NoError(t, err)
		sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: e.re.srv.URL, Timeout: time.Second})
		require.NoError(t, err)
		require.NoError(t, sink.Deliver(t.Context(), rd))
		require.NoError(t, m.Nak()) // delivered again at once, as after the ack wait
	}
	o := e.options(16)
	o.Sink = mustSink(t, e, []int{409, 422})
	e.start(o)
	e.publish("meter.reads.north", read("MTR-2", 2), nil)
	e.settled(10 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 2)
	assert.Equal(t, http.StatusConflict, calls[1].Status)
	dl := e.deadLetters()
	require.Len(t, dl, 1, "only the read whose 409 does not say it was billed")
	assert.Contains(t, string(dl[0].Data), `"MTR-2"`)
	assert.Equal(t, "permanent", dl[0].Header.Get("Dlq-Reason"))
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "ack")))
}

// mustSink is an HTTP sink of e's engine with the given permanent statuses.
func mustSink(t *testing.T, e *env, permanent []int) downstream.Sink {
	t.Helper()
	cl, err := classify.NewHTTP(permanent, nil)
	require.NoError(t, err)
	sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: cl, URL: e.re.srv.URL, Timeout: time.Second, Concurrency: 8})
	require.NoError(t, err)
	return sink
}
