package stream_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// storedRecord is a record as the bucket holds it, for the tests to read
// and write as another replica would.
type storedRecord struct {
	Calls       uint64 `json:"calls"`
	CountsCalls bool   `json:"counts_calls"`
	HandBacks   uint64 `json:"hand_backs,omitempty"`
	Sheds       uint64 `json:"sheds,omitempty"`
	PublishedAt string `json:"published_at,omitempty"`
	DeadLetter  *struct {
		Reason string `json:"reason"`
		Cause  string `json:"cause"`
	} `json:"dead_letter,omitempty"`
}

func (e *env) storedRecord(seq uint64) storedRecord {
	e.t.Helper()
	entry, err := e.set.Records.KV.Get(e.t.Context(), strconv.FormatUint(seq, 10))
	require.NoError(e.t, err)
	var r storedRecord
	require.NoError(e.t, json.Unmarshal(entry.Value(), &r))
	return r
}

// publishedAt is the stream timestamp of the read at seq, as a record
// states it.
func (e *env) publishedAt(js jetstream.JetStream, seq uint64) string {
	e.t.Helper()
	st, err := js.Stream(e.t.Context(), e.topo.Stream)
	require.NoError(e.t, err)
	m, err := st.GetMsg(e.t.Context(), seq)
	require.NoError(e.t, err)
	return m.Time.UTC().Format(time.RFC3339Nano)
}

// An operator deletes and re-creates the source stream: sequences start
// again at 1 and the bucket still holds the old reads' records. A new read
// at an old sequence is settled on its own: one that fails once is called
// again and billed, not dead-lettered with the old read's reason, and one
// that fails for good gets a copy of its own, not dropped as a duplicate of
// the old read's.
func TestReadsOfARecreatedStreamAreNotSettledByTheOldReadsRecords(t *testing.T) {
	t.Parallel()
	const keyB1, keyB2 = "MTR-3@2026-11-30T06:03:00Z", "MTR-4@2026-11-30T06:04:00Z"
	var recreated atomic.Bool
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		switch {
		case recreated.Load() && key == keyB1 && n == 1:
			return http.StatusServiceUnavailable, nil
		case recreated.Load() && key == keyB1:
			return http.StatusOK, nil
		}
		return http.StatusUnprocessableEntity, nil
	})
	stop := e.start(e.options(71))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.publish("meter.reads.north", read("MTR-2", 2), nil)
	e.settled(10 * time.Second)
	require.Len(t, e.deadLetters(), 2)
	stop()

	require.NoError(t, e.js.DeleteStream(t.Context(), e.topo.Stream))
	recreated.Store(true)
	set, err := topology.Ensure(t.Context(), e.js, e.topo)
	require.NoError(t, err)
	e.set, e.cons = set, set.Consumer
	e.start(e.options(72))
	require.Equal(t, uint64(1), e.publish("meter.reads.north", read("MTR-3", 3), nil))
	require.Equal(t, uint64(2), e.publish("meter.reads.north", read("MTR-4", 4), nil))
	e.settled(15 * time.Second)

	calls := e.re.Calls(keyB1)
	require.Len(t, calls, 2, "the read at sequence 1 is called again, not dead-lettered on the old read's record")
	assert.Equal(t, http.StatusOK, calls[1].Status)
	assert.Len(t, e.re.Calls(keyB2), 1)
	dl := e.deadLetters()
	require.Len(t, dl, 3, "the new read at sequence 2 has a copy of its own")
	assert.Contains(t, string(dl[2].Data), `"MTR-4"`)
	assert.Equal(t, "2", dl[2].Header.Get("Dlq-Sequence"))
	at, err := time.Parse(time.RFC3339Nano, dl[2].Header.Get("Dlq-Published-At"))
	require.NoError(t, err)
	assert.Equal(t, e.publishedAt(e.js, 2), at.UTC().Format(time.RFC3339Nano), "the new read's stream timestamp")
	assert.NotEqual(t, dl[1].Header.Get("Nats-Msg-Id"), dl[2].Header.Get("Nats-Msg-Id"))
	assert.Equal(t, e.publishedAt(e.js, 2), e.storedRecord(2).PublishedAt, "the old read's record is replaced by the new one's")
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_record_mismatches_total", "kind", "record")))
}

// A delivery whose record could not be read writes nothing: the record it
// could not see (here: three calls) is not replaced by a record of one. The
// bucket can be written but not read, as when its reads fail; the read's
// call fails, and the call it would record is not.
func TestACallDoesNotWriteOverARecordItCouldNotRead(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	kvStream := "KV_" + topo.Bucket()
	opts := natstest.Options(t.TempDir())
	opts.Users = []*server.User{
		{Username: "admin", Password: "admin"},
		{Username: "consumer", Password: "consumer", Permissions: &server.Permissions{Publish: &server.SubjectPermission{
			Allow: []string{">"},
			Deny:  []string{"$JS.API.DIRECT.GET." + kvStream + ".>", "$JS.API.STREAM.MSG.GET." + kvStream},
		}}},
	}
	s := natstest.Start(t, opts)
	_, admin := natstest.Connect(t, s, nats.UserInfo("admin", "admin"))
	set, err := topology.Ensure(t.Context(), admin, topo)
	require.NoError(t, err)
	nc, js := natstest.Connect(t, s, nats.UserInfo("consumer", "consumer"))
	kv, err := js.KeyValue(t.Context(), topo.Bucket())
	require.NoError(t, err)
	cons, err := js.Consumer(t.Context(), topo.Stream, topo.Durable)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	e := &env{t: t, nc: nc, js: js, topo: topo, cons: cons, set: set, reg: reg, m: stream.NewMetrics(reg), logs: &logRecorder{},
		re: newRateEngine(t, nil)}

	seq := e.publish("meter.reads.north", read("MTR-1", 1), nil)
	// Earlier deliveries, three of them called, as the record says.
	was := fmt.Sprintf(`{"calls":3,"counts_calls":true,"published_at":%q}`, e.publishedAt(admin, seq))
	_, err = set.Records.KV.Put(t.Context(), strconv.FormatUint(seq, 10), []byte(was))
	require.NoError(t, err)
	batch, err := set.Consumer.Fetch(1, jetstreamFetchWait())
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.Nak())
	}

	e.re = newRateEngine(t, func(int, string) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	o := e.options(73)
	o.Records = stream.KVRecords{KV: kv}
	stop := e.start(o)
	// Its look-up fails, its call fails.
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(counter(t, e, "meter_consumer_record_writes_skipped_total")) == 1
	}, 10*time.Second, time.Millisecond)
	stop()

	calls := len(e.re.Calls(key1)) // a retry falling due before the stop ends may be called too (seen under -race)
	require.Positive(t, calls)
	assert.Equal(t, float64(calls), testutil.ToFloat64(counter(t, e, "meter_consumer_record_errors_total", "op", "get")), "every delivery's look-up failed")
	entry, err := set.Records.KV.Get(t.Context(), strconv.FormatUint(seq, 10))
	require.NoError(t, err)
	assert.JSONEq(t, was, string(entry.Value()), "the record it could not read is left as it was")
}

// Another replica writes a read's record while this one is calling the
// engine for it: this one's write meets the other's revision, reads the
// record again and adds its decision to it, instead of writing over it.
func TestTwoWritersOfARecordDoNotOverwriteEachOther(t *testing.T) {
	t.Parallel()
	var e *env
	rival := func(sheds int) {
		// Another replica's write, with the revision it read.
		key := "1"
		body := fmt.Sprintf(`{"calls":0,"counts_calls":true,"sheds":%d,"published_at":%q}`, sheds, e.publishedAt(e.js, 1))
		_, err := e.set.Records.KV.Put(t.Context(), key, []byte(body))
		assert.NoError(t, err)
	}
	e = newEnv(t, func(n int, _ string) (int, http.Header) {
		rival(n)
		if n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusUnprocessableEntity, nil
	})
	e.start(e.options(74))
	require.Equal(t, uint64(1), e.publish("meter.reads.north", read("MTR-1", 1), nil))
	e.settled(10 * time.Second)

	require.Len(t, e.re.Calls(key1), 2)
	require.Len(t, e.deadLetters(), 1)
	got := e.storedRecord(1)
	assert.Equal(t, uint64(2), got.Sheds, "the other replica's write is kept")
	assert.Equal(t, uint64(1), got.Calls, "with this one's call")
	require.NotNil(t, got.DeadLetter, "and this one's decision added to it")
	assert.Equal(t, "permanent", got.DeadLetter.Reason)
	assert.Equal(t, "http_422", got.DeadLetter.Cause)
	assert.Equal(t, 2.0, testutil.ToFloat64(counter(t, e, "meter_consumer_record_conflicts_total")), "the call's record and the decision each met the rival's write")
}

// Another delivery of the read (a replica that took it over) decided its
// fate and wrote it first, while this one was calling the engine: this
// one's decision meets it on the record, and the copy carries the decision
// on record, its reason, cause and error text as written, not this
// delivery's.
func TestTheDecisionWrittenFirstIsTheCopys(t *testing.T) {
	t.Parallel()
	var e *env
	e = newEnv(t, func(int, string) (int, http.Header) {
		body := fmt.Sprintf(`{"calls":0,"counts_calls":true,"published_at":%q,"dead_letter":{"reason":"expired","class":"transient",`+
			`"cause":"http_503","error":"http_503: the other delivery's","at":%q}}`,
			e.publishedAt(e.js, 1), time.Now().UTC().Format(time.RFC3339Nano))
		_, err := e.set.Records.KV.Put(t.Context(), "1", []byte(body))
		assert.NoError(t, err)
		return http.StatusUnprocessableEntity, nil
	})
	e.start(e.options(78))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)

	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "expired", dl[0].Header.Get(dlq.HeaderReason), "the decision on record, not this delivery's permanent")
	assert.Equal(t, "http_503", dl[0].Header.Get(dlq.HeaderCause))
	assert.Equal(t, "http_503: the other delivery's", dl[0].Header.Get(dlq.HeaderError), "its error text as written")
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "expired")))
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_failures_total", "class", "permanent", "cause", "http_422")),
		"this delivery's failure is counted as it was")
}

// A stop hands back every read it holds within its grace period (the
// shutdown timeout, then handBackGrace), even when every request to the
// records bucket goes unanswered: here the bucket's server is gone.
func TestAStopWithTheRecordsBucketDownEndsWithinItsGrace(t *testing.T) {
	t.Parallel()
	// The engine answers once every read is in the replica's buffer: the
	// breaker then parks them all (opened earlier, it stops pulling with
	// the rest still at the server).
	delivered := make(chan struct{})
	e := newEnv(t, func(int, string) (int, http.Header) {
		<-delivered
		return http.StatusServiceUnavailable, nil
	})
	release := sync.OnceFunc(func() { close(delivered) })
	t.Cleanup(release) // before the engine's own cleanup: no call waits
	rs := natstest.Run(t)
	_, rjs := natstest.Connect(t, rs, nats.ReconnectWait(time.Hour))
	kv, err := rjs.CreateKeyValue(t.Context(), e.topo.RecordsConfig())
	require.NoError(t, err)
	o := e.options(75)
	o.Records = stream.KVRecords{KV: kv}
	o.Concurrency, o.PullBatch = 2, 64
	o.ShutdownTimeout = 200 * time.Millisecond
	o.Breaker = &breaker.Options{Window: time.Minute, MinCalls: 1, FailureRatio: 0.5, CoolDown: time.Hour, MaxCoolDown: time.Hour, Probes: 3}
	openAtOnce(&o)
	const reads = 60
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	stop := e.start(o)
	require.Eventually(t, func() bool {
		info, err := e.cons.Info(t.Context())
		return err == nil && info.NumAckPending == reads
	}, 10*time.Second, time.Millisecond, "every read delivered")
	release()
	// Two reads wait for the breaker, the rest are parked.
	var held float64
	if !assert.Eventually(t, func() bool {
		held = testutil.ToFloat64(counterGauge(t, e, "meter_consumer_retry_held"))
		return held == reads-2
	}, 10*time.Second, time.Millisecond) {
		t.Fatalf("held %v, calls %d, open %v, logs:\n%s", held, e.re.Stats().Calls,
			testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")), e.logs.String())
	}
	rs.Shutdown()
	rs.WaitForShutdown()

	began := time.Now()
	stop()
	took := time.Since(began)
	assert.Less(t, took, o.ShutdownTimeout+stream.HandBackGrace+time.Second, "the stop is bounded")
	assert.Equal(t, float64(reads), testutil.ToFloat64(counter(t, e, "meter_consumer_hand_backs_total")), "every read is handed back")
	assert.Equal(t, float64(reads), testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "nak")))
	t.Logf("stop took %s", took)
}

// A durable deleted and made again restarts every retained read's delivery
// count at 1: a read dead-lettered before is posted again and fails again.
// Its first delivery does not look its record up, but its write meets the
// record (the same read's), takes the recorded decision, and looks for the
// copy past the duplicate window: one copy, not two.
func TestARecreatedDurableDoesNotCopyADeadLetteredReadTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	cfg := e.topo.DLQStreamConfig()
	cfg.Duplicates = 200 * time.Millisecond
	_, err := e.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	options := func(seed uint64) opts {
		o := e.options(seed)
		o.DeadLetterWindow = cfg.Duplicates
		return o
	}
	stop := e.start(options(76))
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	e.settled(10 * time.Second)
	require.Len(t, e.deadLetters(), 1)
	stop()

	require.NoError(t, e.js.DeleteConsumer(t.Context(), e.topo.Stream, e.topo.Durable))
	set, err := topology.Ensure(t.Context(), e.js, e.topo)
	require.NoError(t, err)
	e.set, e.cons = set, set.Consumer
	// The dead-letter stream's duplicate window forgets the copy's id (a
	// timeline, not a wait for a condition).
	time.Sleep(2 * cfg.Duplicates)
	e.start(options(77))
	e.settled(10 * time.Second)

	assert.Len(t, e.re.Calls(key1), 2, "the read is posted again: harmless, under its idempotency key")
	assert.Len(t, e.deadLetters(), 1, "and copied once")
	found := e.logs.byMessage("dead-lettered")
	require.Len(t, found, 2)
	assert.True(t, found[1]["copy_found"].Bool())
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_record_conflicts_total")))
}

// A record of an earlier version states no stream timestamp: it is the
// read's only when it was written after the read was stored. One written
// before (the old read's, left from before the stream was re-created) does
// not decide the read's fate; one written after still counts the read's
// attempts its way: the delivery count less the hand-backs.
func TestARecordOfAnEarlierVersionIsTheReadsOnlyIfWrittenAfterIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	kv := e.set.Records.KV
	_, err := kv.Put(t.Context(), "1", []byte(`{"dead_letter":{"reason":"permanent","class":"permanent","cause":"http_422","error":"the old read's","at":"2026-11-30T06:00:00Z","last":"2026-11-30T06:00:00Z"}}`))
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.publish("meter.reads.north", read("MTR-1", 1), nil))
	require.Equal(t, uint64(2), e.publish("meter.reads.north", read("MTR-2", 2), nil))
	_, err = kv.Put(t.Context(), "2", []byte(`{"hand_backs":1}`))
	require.NoError(t, err)
	o := e.options(78)
	e.nakUncalled(o.Policy.MaxAttempts+1, 2) // both reach the consumer at delivery 6
	e.start(o)
	e.settled(10 * time.Second)

	calls := e.re.Calls(key1)
	require.Len(t, calls, 1, "no call of its own on record: called, not dead-lettered by the old read's decision")
	assert.Equal(t, http.StatusOK, calls[0].Status)
	dl := e.deadLetters()
	require.Len(t, dl, 1)
	assert.Equal(t, "2", dl[0].Header.Get("Dlq-Sequence"))
	assert.Equal(t, "exhausted", dl[0].Header.Get("Dlq-Reason"), "5 deliveries less 1 hand-back: past the 4 attempts")
	assert.Equal(t, "unsettled", dl[0].Header.Get("Dlq-Cause"))
	assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, e, "meter_consumer_record_mismatches_total", "kind", "record")))
}
