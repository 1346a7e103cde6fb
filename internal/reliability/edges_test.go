package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/proctest"
)

// The scenarios of issue 11, "trust at the edges": an answer that only
// looks like a delivery, a read cut by a shutdown in its last attempt, copies
// the dead-letter stream cannot take as they are, and a durable made by an
// operator. Each ends on the ledger.

// Scenario 11: an auth proxy in front of the rate engine redirects every
// POST (302, 307 and 308) to a login page that answers 200 to anything, for
// a while, then the engine is reachable again. Reads before and after it
// succeed.
func TestRedirectingEngineAcksNothing(t *testing.T) {
	t.Parallel()
	// A quick breaker: 5 calls in a 2s window, one probe every 100-600ms.
	s := newScenario(t, setup{args: []string{
		"--breaker-window", "2s", "--breaker-min-calls", "5", "--breaker-cool-down", "200ms",
		"--breaker-max-cool-down", "400ms", "--breaker-probes", "1",
	}})
	c, e := s.consumer, s.engine
	s.publish("OKA", 10, 0)
	require.Eventually(t, func() bool { d, _ := e.delivered(); return len(d) == 10 }, 10*time.Second, 5*time.Millisecond)

	// The proxy goes up: meter R302 is answered 302, R307 307, R308 308.
	e.setPolicy(func(key string, _ int) int { return redirectStatus(key) })
	for i := range 7 {
		for _, m := range []string{"R302", "R307", "R308"} {
			body, key := read(m, i)
			s.publishBody("meter.reads."+m, body, key, nil)
		}
	}
	redirectedAcks := func() int {
		n := 0
		for _, l := range logged(c, "ack") {
			if id, _ := l["meter_id"].(string); strings.HasPrefix(id, "R30") {
				n++
			}
		}
		return n
	}
	opens := func() int { return len(logged(c, "breaker", "to", "open")) }
	// Until the breaker opened and a probe failed (it opened again), or a
	// redirected read was acked.
	require.Eventually(t, func() bool { return opens() >= 2 || redirectedAcks() > 0 }, 15*time.Second, 5*time.Millisecond)
	assert.Zero(t, redirectedAcks(), "reads acked while every POST was redirected")
	assert.Empty(t, e.loginRequests(), "a redirect was followed")
	require.GreaterOrEqual(t, opens(), 2, "the breaker holds the reads while every call redirects")
	seen := e.statuses()
	for _, s := range []int{302, 307, 308} {
		assert.Positive(t, seen[s], "no call answered %d", s)
	}
	assert.Positive(t, len(logged(c, "nak", "cause", "redirect"))+len(logged(c, "held for the breaker", "cause", "redirect")),
		"a 3xx is a transient failure with cause redirect")

	e.setPolicy(nil) // the proxy lets POSTs through again
	fixed := time.Now()
	s.publish("OKC", 5, 0)
	s.settled(30 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(fixed)
	assert.Equal(t, f.Published, len(logged(c, "ack")), "each read acked once, after its POST was answered 2xx")
	assert.Empty(t, e.loginRequests(), "a redirect was followed")
	t.Logf("redirects answered: 302=%d 307=%d 308=%d; breaker opened %d times", seen[302], seen[307], seen[308], opens())
	f.log(t, "redirect")
}

// redirectStatus is the 3xx a redirecting engine answers a key with: its
// meter's number (R302, R307, R308), 302 for any other.
func redirectStatus(key string) int {
	if s, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(key, "@", 2)[0], "R")); err == nil && s >= 300 && s < 400 {
		return s
	}
	return http.StatusFound
}

// Scenario 12: a read published in an atomic batch fails for good (the
// engine answers 422 for it): its original headers include Nats-Batch-Id and
// Nats-Batch-Sequence, which the dead-letter stream would refuse.
func TestAtomicBatchReadDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{later: true, policy: func(key string, _ int) int {
		if strings.HasPrefix(key, "BATBAD@") {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}})
	// The head-ends' operator made the stream and lets it take atomic batches.
	_, err := s.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "METER_READS", Subjects: []string{"meter.reads.>"}, Storage: jetstream.FileStorage,
		Duplicates: 10 * time.Minute, AllowAtomicPublish: true,
	})
	require.NoError(t, err)
	s.publish("GOOD", 5, 0)
	bad, badKey := read("BATBAD", 0)
	first, _ := read("BATCH", 0)
	last, _ := read("BATCH", 1)
	s.publishAtomicBatch("meter.reads.batch", [][]byte{first, bad, last})
	s.publish("GOOD2", 5, 0)

	c := s.start("consumer", "--create-streams")
	s.settled(15 * time.Second)
	f := s.checkLedger(func(k string) bool { return k == badKey }, 1)

	copies := s.copies()
	require.Len(t, copies, 1)
	cp := copies[0]
	assert.Equal(t, bad, cp.Data, "the copy holds the original bytes")
	assert.Equal(t, "permanent", cp.Header.Get("Dlq-Reason"))
	assert.Equal(t, "http_422", cp.Header.Get("Dlq-Cause"))
	for k := range cp.Header {
		assert.False(t, strings.HasPrefix(strings.ToLower(k), "nats-batch-"), "the copy kept %s", k)
	}
	assert.Contains(t, cp.Header.Get("Dlq-Dropped-Headers"), "Nats-Batch-Id")
	st, err := s.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	seq, err := strconv.ParseUint(cp.Header.Get("Dlq-Sequence"), 10, 64)
	require.NoError(t, err)
	orig, err := st.GetMsg(t.Context(), seq)
	require.NoError(t, err)
	assert.NotEmpty(t, orig.Header.Get("Nats-Batch-Id"), "the original was stored as part of a batch")
	calls := len(s.engine.answered(badKey))
	assert.Equal(t, 1, calls, "the failing read was posted once")
	assert.Equal(t, 1, c.Count("dead-lettered"), "one dead-letter, one TERM")
	f.log(t, "atomic-batch")
}

// publishAtomicBatch publishes bodies to subject as one atomic batch, as
// nats-server v2.15.2 takes it (server/jetstream_batching.go; nats.go
// v1.55.0 has no API for it): every message carries Nats-Batch-Id and its
// Nats-Batch-Sequence from 1, the last one Nats-Batch-Commit: 1 and a reply
// subject for the batch's ack; the others are published without one.
func (w *world) publishAtomicBatch(subject string, bodies [][]byte) {
	w.t.Helper()
	id := "batch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var keys []string
	for i, body := range bodies {
		var r struct {
			MeterID string `json:"meter_id"`
			ReadAt  string `json:"read_at"`
		}
		require.NoError(w.t, json.Unmarshal(body, &r))
		key := r.MeterID + "@" + r.ReadAt
		keys = append(keys, key)
		m := nats.NewMsg(subject)
		m.Data = body
		m.Header.Set("Nats-Msg-Id", "pub:"+subject+":"+key)
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < len(bodies)-1 {
			require.NoError(w.t, w.nc.PublishMsg(m))
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := w.nc.RequestMsg(m, 5*time.Second)
		require.NoError(w.t, err)
		var ack struct {
			Seq       uint64 `json:"seq"`
			BatchID   string `json:"batch"`
			BatchSize int    `json:"count"`
			Error     *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		require.NoError(w.t, json.Unmarshal(resp.Data, &ack))
		require.Nil(w.t, ack.Error, "batch refused: %s", resp.Data)
		require.Equal(w.t, id, ack.BatchID)
		require.Equal(w.t, len(bodies), ack.BatchSize)
	}
	w.mu.Lock()
	w.keys = append(w.keys, keys...)
	w.mu.Unlock()
}

// Scenario 13: an invalid read close to the server's max payload (16 KiB
// here), whose dead-letter copy would not fit once its Dlq-* headers are
// added.
func TestOversizeReadGetsATruncatedCopy(t *testing.T) {
	t.Parallel()
	const maxPayload = 16 << 10
	s := newScenario(t, setup{server: func(o *server.Options) { o.MaxPayload = maxPayload }})
	s.publish("GOOD", 5, 0)
	// A read without a zone in read_at, padded with an unknown field to
	// leave 256 bytes for the head-end's own headers.
	head := `{"meter_id":"BIG-1","read_at":"2026-11-30T07:00:00","quantity":"1","unit":"kWh","pad":"`
	big := []byte(head + strings.Repeat("x", maxPayload-256-len(head)-2) + `"}`)
	s.publishBody("meter.reads.big", big, "BIG-1", nil)
	s.publish("GOOD2", 5, 0)
	s.settled(15 * time.Second)
	f := s.checkLedger(func(k string) bool { return k == "BIG-1" }, 1)

	copies := s.copies()
	require.Len(t, copies, 1)
	cp := copies[0]
	assert.Equal(t, "permanent", cp.Header.Get("Dlq-Reason"))
	assert.Equal(t, "invalid_payload", cp.Header.Get("Dlq-Cause"))
	assert.Equal(t, "true", cp.Header.Get("Dlq-Truncated"))
	assert.Equal(t, strconv.Itoa(len(big)), cp.Header.Get("Dlq-Original-Size"))
	assert.Less(t, len(cp.Data), len(big), "the payload was cut")
	assert.True(t, bytes.HasPrefix(big, cp.Data), "the copy holds the start of the original bytes")
	assert.LessOrEqual(t, wireSize(cp.Header)+len(cp.Data), maxPayload, "the copy fits the server's max payload")
	st, err := s.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	seq, err := strconv.ParseUint(cp.Header.Get("Dlq-Sequence"), 10, 64)
	require.NoError(t, err)
	orig, err := st.GetMsg(t.Context(), seq)
	require.NoError(t, err, "the full read stays in the source stream at Dlq-Sequence")
	assert.Equal(t, big, orig.Data)
	assert.Equal(t, 1, s.consumer.Count("dead-lettered"))
	t.Logf("copy: %d of %d payload bytes, %d header bytes", len(cp.Data), len(big), wireSize(cp.Header))
	f.log(t, "oversize")
}

// wireSize is the size of h on the wire (NATS/1.0, a line per value, the
// closing blank line).
func wireSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// Scenario 14: the streams and the durable were made by an operator, the
// durable with settings the service cannot keep its promises on (MaxDeliver
// 3; a BackOff; another filter), and reads wait in it: some need a fourth
// delivery, some fail until they are exhausted (6 attempts).
func TestOperatorDurable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give jetstream.ConsumerConfig // what the operator changed
		want []string                 // in the refusal
	}{
		{name: "max-deliver", give: jetstream.ConsumerConfig{MaxDeliver: 3},
			want: []string{"max_deliver is 3", "set max_deliver to -1"}},
		{name: "backoff", give: jetstream.ConsumerConfig{BackOff: []time.Duration{time.Second, 2 * time.Second}},
			want: []string{"backoff is [1s 2s]", "remove it"}},
		{name: "filter", give: jetstream.ConsumerConfig{FilterSubject: "meter.reads.GOOD"},
			want: []string{"it consumes [meter.reads.GOOD]", "set filter_subjects to meter.reads.>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { operatorDurable(t, tt.name, tt.give, tt.want) })
	}
}

func operatorDurable(t *testing.T, name string, give jetstream.ConsumerConfig, want []string) {
	// FLAKY reads are answered 503 three times, then 200; DOOMED always 503.
	s := newScenario(t, setup{later: true, policy: func(key string, n int) int {
		switch {
		case strings.HasPrefix(key, "DOOMED@"), strings.HasPrefix(key, "FLAKY@") && n <= 3:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}})
	ctx := t.Context()
	_, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "METER_READS", Subjects: []string{"meter.reads.>"},
		Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute})
	require.NoError(t, err)
	_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "METER_READS_DLQ", Subjects: []string{"meter.dlq.>"},
		Storage: jetstream.FileStorage, Duplicates: 20 * time.Minute})
	require.NoError(t, err)
	durable := give
	durable.Durable, durable.AckPolicy, durable.AckWait = "meter-consumer", jetstream.AckExplicitPolicy, 3*time.Second
	_, err = s.js.CreateConsumer(ctx, "METER_READS", durable)
	require.NoError(t, err)
	s.publish("GOOD", 10, 0)
	s.publish("FLAKY", 5, 0)
	s.publish("DOOMED", 3, 0)
	// The breaker is off: this scenario is about the attempt limit, here
	// 6 attempts with delays of at most 50, 100, 100, 100 and 100ms.
	args := []string{"--breaker=false", "--retry-cap", "100ms"}

	// Refused, with a message naming the field and the fix, and the
	// durable left as the operator made it.
	out, code := runToExit(t, 20*time.Second, s.flags(slices.Concat(args, []string{"--create-streams"})...)...)
	assert.NotZero(t, code, "the operator's durable was accepted:\n%s", out)
	for _, s := range append(want, "--reconcile") {
		assert.Contains(t, out, s)
	}
	cons, err := s.js.Consumer(ctx, "METER_READS", "meter-consumer")
	require.NoError(t, err)
	have := cons.CachedInfo().Config
	assert.Equal(t, give.MaxDeliver, max(have.MaxDeliver, 0), "the durable was changed without --reconcile")
	assert.Equal(t, give.BackOff, have.BackOff, "the durable was changed without --reconcile")
	assert.Equal(t, give.FilterSubject, have.FilterSubject, "the durable was changed without --reconcile")
	_, calls := s.engine.delivered()
	assert.Zero(t, calls, "a refused consumer delivered reads")

	began := time.Now()
	c := s.start("consumer", slices.Concat(args, []string{"--create-streams", "--reconcile"})...)
	s.settled(20 * time.Second)
	f := s.checkLedger(func(k string) bool { return strings.HasPrefix(k, "DOOMED@") }, 3)
	f.Recovery = time.Since(began)
	cons, err = s.js.Consumer(ctx, "METER_READS", "meter-consumer")
	require.NoError(t, err)
	have = cons.CachedInfo().Config
	assert.Equal(t, -1, have.MaxDeliver, "reconciled")
	assert.Empty(t, have.BackOff, "reconciled")
	for _, cp := range s.copies() {
		assert.Equal(t, "exhausted", cp.Header.Get("Dlq-Reason"))
		// 6 attempts charged; deliveries may be more: with half of the
		// first reads failing (FLAKY and DOOMED), the engine's view sees it
		// shedding broadly and credits those sheds back.
		d, err := strconv.Atoi(cp.Header.Get("Dlq-Deliveries"))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, d, 6)
	}
	assert.Equal(t, 3, c.Count("dead-lettered"))
	t.Logf("refused with exit code %d: %s", code, lastLine(out))
	f.log(t, "operator-durable-"+name)
}

// runToExit runs the binary with the fast flags and args and returns its
// output and exit code; the test fails if it is still running after within.
func runToExit(t *testing.T, within time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(append([]string{}, fast...), args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "still running after %s:\n%s", within, out)
	if err != nil && cmd.ProcessState == nil {
		require.NoError(t, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Scenario 15: SIGTERM while a read is in its last attempt (delivery 3 of
// --max-attempts 3) and the engine takes longer than the shutdown timeout to
// answer it; a second process follows.
func TestShutdownDuringTheLastAttempt(t *testing.T) {
	t.Parallel()
	const slow = 30 * time.Second
	// The downstream timeout (1.5s) is longer than the shutdown timeout
	// (500ms): the stop's deadline, not the call's, cuts the last attempt.
	args := []string{"--breaker=false", "--max-attempts", "3"}
	s := newScenario(t, setup{consumers: []string{"first"}, args: slices.Concat(args, []string{"--shutdown-timeout", "500ms"})})
	first, e := s.consumer, s.engine
	// Two 503s, then the third call (the last attempt) hangs.
	e.setPolicy(func(_ string, n int) int {
		if n == 2 {
			e.setLatency(slow)
		}
		return http.StatusServiceUnavailable
	})
	s.publish("LAST", 1, 0)
	require.Eventually(t, func() bool { return e.arrived() == 3 }, 10*time.Second, time.Millisecond)
	code, took := first.Term(10 * time.Second)
	assert.Equal(t, 0, code, "clean exit")
	handedBack := logged(first, "handed back")
	require.Len(t, handedBack, 1, "the cut read was handed back")
	assert.Equal(t, float64(3), handedBack[0]["deliveries"], "during its last attempt")
	assert.Equal(t, "shutdown", handedBack[0]["cause"])
	assert.Zero(t, first.Count("dead-lettered"))
	assert.Empty(t, s.deadLetters(), "a read cut by the shutdown was dead-lettered")
	assert.Equal(t, 2, callsOnRecord(t, s.world, 1), "the two failed calls are on record, the cut one is not charged")

	e.setLatency(0)
	e.setPolicy(nil)
	stopped := time.Now()
	second := s.start("second", args...)
	s.settled(15 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(stopped)
	acks := logged(second, "ack")
	require.Len(t, acks, 1, "the second process delivers it")
	assert.Equal(t, float64(4), acks[0]["deliveries"])
	assert.Zero(t, second.Count("dead-lettered"))
	t.Logf("SIGTERM to exit: %s; hand-back: %v", took.Round(time.Millisecond), handedBack[0]["error"])
	f.log(t, "shutdown-last-attempt")
}

// callsOnRecord returns the calls charged to the read at stream sequence
// seq, as the records bucket holds them (internal/stream.Record).
func callsOnRecord(t *testing.T, w *world, seq uint64) int {
	t.Helper()
	kv, err := w.js.KeyValue(t.Context(), "METER_READS_meter-consumer_records")
	require.NoError(t, err)
	entry, err := kv.Get(t.Context(), strconv.FormatUint(seq, 10))
	require.NoError(t, err)
	var rec struct {
		Calls int `json:"calls"`
	}
	require.NoError(t, json.Unmarshal(entry.Value(), &rec))
	return rec.Calls
}

// copies returns every message of the dead-letter stream.
func (w *world) copies() []*jetstream.RawStreamMsg {
	w.t.Helper()
	st, err := w.js.Stream(context.Background(), "METER_READS_DLQ")
	require.NoError(w.t, err)
	info, err := st.Info(context.Background())
	require.NoError(w.t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		if m, err := st.GetMsg(context.Background(), seq); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// logged returns p's log records with msg whose attributes include every
// key-value pair in kv.
func logged(p *proctest.Proc, msg string, kv ...string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(p.Output(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg {
			continue
		}
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(l[kv[i]]) != kv[i+1] {
				match = false
			}
		}
		if match {
			out = append(out, l)
		}
	}
	return out
}
