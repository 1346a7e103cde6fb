package dlqops_test

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

func TestReplaySubset(t *testing.T) {
	e := newEnv(t, reads()...)
	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Cause: "http_422"}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Replayed: 2}, sum)
	assert.Equal(t, "replayed 2, skipped as duplicate 0, skipped at max replays 0, failed 0\n", e.out.String())

	assert.Equal(t, []uint64{2, 3, 4}, e.copies(), "only the replayed copies are gone")
	msgs := e.sourceMsgs()
	require.Len(t, msgs, 2)
	rs := reads()

	assert.Equal(t, "meter.reads.north", msgs[0].Subject)
	assert.Equal(t, rs[0].data, msgs[0].Data, "payload byte for byte")
	assert.Equal(t, nats.Header{
		"X-Head-End":        {"he-7", "he-8"}, // original headers kept
		"Nats-Msg-Id":       {"replay:METER_READS_DLQ:1"},
		"Dlq-Replayed-From": {"1"},
		"Dlq-Replay-Count":  {"1"},
	}, msgs[0].Header)

	assert.Equal(t, "meter.reads.east", msgs[1].Subject)
	assert.Equal(t, rs[4].data, msgs[1].Data)
	assert.Equal(t, nats.Header{
		"Nats-Msg-Id":       {"replay:METER_READS_DLQ:5"},
		"Dlq-Replayed-From": {"5"},
		"Dlq-Replay-Count":  {"1"},
	}, msgs[1].Header)
}

func TestReplayMsgHeaders(t *testing.T) {
	m, err := dlqops.ReplayMsg(dlqName, dlqops.Entry{
		Seq: 7, Subject: "meter.reads.north", ReplayCount: 2, Data: []byte("x"),
		Header: nats.Header{
			"X-Head-End": {"he-7"}, "Nats-Msg-Id": {"dlq:METER_READS:9"}, "Dlq-Reason": {"permanent"},
			"Dlq-Original-Msg-Id": {"replay:METER_READS_DLQ:3"}, "Dlq-Replay-Count": {"2"}, "Dlq-Replayed-From": {"3"},
			"Nats-Expected-Stream": {"METER_READS_DLQ"}, "Nats-Expected-Last-Sequence": {"4"}, "Nats-TTL": {"1h"},
			"Nats-Rollup": {"sub"}, "Nats-Schedule": {"@every 1m"}, "dlq-lower": {"x"},
			"Nats-Batch-Id": {"b1"}, "Nats-Batch-Sequence": {"3"}, "Nats-Incr": {"+1"}, "KV-Operation": {"PURGE"},
		},
	})
	require.NoError(t, err)
	assert.Equal(t, "meter.reads.north", m.Subject)
	assert.Equal(t, []byte("x"), m.Data)
	assert.Equal(t, nats.Header{
		"X-Head-End":        {"he-7"},
		"Nats-Msg-Id":       {"replay:METER_READS_DLQ:7"},
		"Dlq-Replayed-From": {"7"},
		"Dlq-Replay-Count":  {"3"},
	}, m.Header)

	for _, subject := range []string{"", "meter.reads.*", "meter..x"} {
		_, err := dlqops.ReplayMsg(dlqName, dlqops.Entry{Seq: 1, Subject: subject})
		assert.ErrorIs(t, err, dlqops.ErrInvalid, "subject %q", subject)
	}
}

// TestReplayInterruptedThenResumed stops a replay half way, after a crash
// between a republish and the delete of its copy, and runs it again: every
// read lands in the source stream exactly once.
func TestReplayInterruptedThenResumed(t *testing.T) {
	tests := []struct {
		name      string
		interrupt func(e *env) (dlqops.ReplaySummary, error)
		wantErr   error
	}{
		{"limit", func(e *env) (dlqops.ReplaySummary, error) {
			return e.ops.Replay(e.t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Limit: 2}})
		}, nil},
		{"cancelled", func(e *env) (dlqops.ReplaySummary, error) {
			ctx, cancel := context.WithCancel(e.t.Context())
			defer cancel()
			// Cancel while waiting for the third publish's turn.
			e.clock.onSleep = func(n int) error {
				if n == 2 {
					cancel()
				}
				return nil
			}
			defer func() { e.clock.onSleep = nil }()
			return e.ops.Replay(ctx, dlqops.ReplayOptions{})
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, reads()...)
			// A crash: read 3 was republished, its copy never deleted.
			crash := copyEntry(t, e, 3)
			m, err := dlqops.ReplayMsg(dlqName, crash)
			require.NoError(t, err)
			_, err = e.js.PublishMsg(t.Context(), m, jetstream.WithExpectStream(srcName))
			require.NoError(t, err)

			sum, err := tt.interrupt(e)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Replayed: 2}, sum)
			assert.Equal(t, []uint64{3, 4, 5}, e.copies())
			assert.Contains(t, e.out.String(), "replayed 2, skipped as duplicate 0, skipped at max replays 0, failed 0\n")

			e.out.Reset()
			sum, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
			require.NoError(t, err)
			assert.Equal(t, dlqops.ReplaySummary{Selected: 3, Replayed: 2, Duplicates: 1}, sum, "read 3 was already replayed")
			assert.Equal(t, "replayed 2, skipped as duplicate 1, skipped at max replays 0, failed 0\n", e.out.String())
			assert.Empty(t, e.copies(), "the duplicate's copy is deleted too")

			sum, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
			require.NoError(t, err)
			assert.Equal(t, dlqops.ReplaySummary{}, sum, "nothing left")

			var ids []string
			for _, m := range e.sourceMsgs() {
				ids = append(ids, m.Header.Get(nats.MsgIdHdr))
			}
			assert.Equal(t, []string{
				"replay:METER_READS_DLQ:3", "replay:METER_READS_DLQ:1", "replay:METER_READS_DLQ:2",
				"replay:METER_READS_DLQ:4", "replay:METER_READS_DLQ:5",
			}, ids, "each read once")
		})
	}
}

// copyEntry returns the dead-letter copy at seq as an Entry.
func copyEntry(t *testing.T, e *env, seq uint64) dlqops.Entry {
	t.Helper()
	raw, err := e.dlq.GetMsg(t.Context(), seq)
	require.NoError(t, err)
	n, _ := strconv.Atoi(raw.Header.Get(dlqops.HeaderReplayCount))
	return dlqops.Entry{Seq: seq, Subject: raw.Header.Get(dlq.HeaderSubject), ReplayCount: n, Header: raw.Header, Data: raw.Data}
}

func TestReplayTwiceAtOnceIsSafe(t *testing.T) {
	e := newEnv(t, reads()...)
	ops2 := *e.ops
	ops2.Out = nil
	done := make(chan dlqops.ReplaySummary)
	go func() {
		sum, err := ops2.Replay(t.Context(), dlqops.ReplayOptions{})
		assert.NoError(t, err)
		done <- sum
	}()
	sum1, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	sum2 := <-done
	assert.Equal(t, 5, sum1.Replayed+sum2.Replayed, "%+v %+v", sum1, sum2)
	assert.Zero(t, sum1.Failed+sum2.Failed)
	assert.Len(t, e.sourceMsgs(), 5)
	assert.Empty(t, e.copies())
	assert.Len(t, e.marks(), 5, "one mark per copy: a second is a duplicate by its id")
}

func TestReplayDryRunChangesNothing(t *testing.T) {
	rs := reads()
	rs[1].header = nats.Header{dlqops.HeaderReplayCount: {"3"}}
	e := newEnv(t, rs...)
	e.ops.Terminal = true
	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{DryRun: true, Filter: dlqops.Filter{Subject: "meter.reads.*"}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 4, SkippedMaxReplays: 1}, sum)
	assert.Equal(t, `SEQ  REASON     CAUSE            SUBJECT            METER  DELIVERIES  REPLAYS  AGE    ERROR
1    permanent  http_422         meter.reads.north  MTR-1  1           0        3h0m   http_422: downstream answered 422 Unprocessable Entity
3    permanent  invalid_payload  meter.reads.south  -      1           0        1h30m  invalid_payload: invalid meter read: body: invalid UTF-8
5    permanent  http_422         meter.reads.east   MTR-4  1           0        5m     http_422: downstream answered 422 Unprocessable Entity
seq 2: skipped, replayed 3 times already (--max-replays 3); copy kept
dry run, nothing changed: would replay 3, would skip at max replays 1
`, e.out.String(), "the table, the skips, the summary; no progress bar")
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, e.copies())
	assert.Empty(t, e.sourceMsgs())
	assert.Empty(t, e.clock.slept, "a dry run is not paced")
}

func TestReplayMaxReplays(t *testing.T) {
	rs := reads()[:2]
	rs[0].header = nats.Header{dlqops.HeaderReplayCount: {"2"}, dlqops.HeaderReplayedFrom: {"40"}, "X-Head-End": {"he-7"}}
	rs[1].header = nats.Header{dlqops.HeaderReplayCount: {"3"}}
	tests := []struct {
		name       string
		maxReplays int
		want       dlqops.ReplaySummary
		left       []uint64
	}{
		{"default 3", 0, dlqops.ReplaySummary{Selected: 2, Replayed: 1, SkippedMaxReplays: 1}, []uint64{2}},
		{"4", 4, dlqops.ReplaySummary{Selected: 2, Replayed: 2}, nil},
		{"1", 1, dlqops.ReplaySummary{Selected: 2, SkippedMaxReplays: 2}, []uint64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, rs...)
			sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{MaxReplays: tt.maxReplays})
			require.NoError(t, err)
			assert.Equal(t, tt.want, sum)
			assert.Equal(t, tt.left, e.copies())
			if tt.want.SkippedMaxReplays > 0 {
				assert.Contains(t, e.out.String(), "seq 2: skipped, replayed 3 times already")
			}
			if tt.want.Replayed > 0 {
				m := e.sourceMsgs()[0]
				assert.Equal(t, "3", m.Header.Get(dlqops.HeaderReplayCount), "the count accumulates")
				assert.Equal(t, "1", m.Header.Get(dlqops.HeaderReplayedFrom))
			}
		})
	}
}

// TestReplayCountAccumulatesAcrossCycles replays a read, dead-letters the
// replayed read again the way the consumer does, and replays it again.
func TestReplayCountAccumulatesAcrossCycles(t *testing.T) {
	e := newEnv(t, reads()[0])
	for cycle := 1; cycle <= 3; cycle++ {
		sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
		require.NoError(t, err)
		require.Equal(t, dlqops.ReplaySummary{Selected: 1, Replayed: 1}, sum, "cycle %d", cycle)
		msgs := e.sourceMsgs()
		last := msgs[len(msgs)-1]
		assert.Equal(t, strconv.Itoa(cycle), last.Header.Get(dlqops.HeaderReplayCount))
		assert.Equal(t, reads()[0].data, last.Data)

		// The consumer gives up on the replayed read again.
		p := dlq.NewPublisher(e.js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: dlqName, Now: e.clock.Now})
		require.NoError(t, p.Publish(t.Context(), dlq.Entry{
			Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: srcName, Consumer: "meter-consumer",
			Subject: last.Subject, Sequence: last.Sequence, Deliveries: 1, PublishedAt: last.Time,
			Header: last.Header, Data: last.Data,
		}))
	}
	e.out.Reset()
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{}, false))
	assert.Equal(t, "3", strings.Fields(strings.Split(e.out.String(), "\n")[1])[6], "REPLAYS")

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 1, SkippedMaxReplays: 1}, sum, "a loop ends at --max-replays")
	assert.Len(t, e.sourceMsgs(), 3)
}

func TestReplayFailedPublishKeepsTheCopy(t *testing.T) {
	rs := reads()[:3]
	rs[1].subject = "other.reads.north" // stored by another stream than the source
	e := newEnv(t, rs...)
	_, err := e.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
	require.NoError(t, err)

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 3, Replayed: 2, Failed: 1}, sum)
	assert.Contains(t, e.out.String(), "seq 2: not replayed, copy kept: publish to other.reads.north: ")
	assert.Equal(t, []uint64{2}, e.copies())
	assert.Len(t, e.sourceMsgs(), 2)
	other, err := e.js.Stream(t.Context(), "OTHER")
	require.NoError(t, err)
	assert.Zero(t, other.CachedInfo().State.Msgs, "not replayed into another stream")
}

func TestReplayRate(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		want time.Duration
	}{
		{"default 10 a second", 0, 100 * time.Millisecond},
		{"2 a second", 2, 500 * time.Millisecond},
		{"250 a second", 250, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, reads()...)
			_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Rate: tt.rate})
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{tt.want, tt.want, tt.want, tt.want}, e.clock.slept, "the first goes at once")
		})
	}
	e := newEnv(t)
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Rate: rate})
		assert.ErrorIs(t, err, dlqops.ErrInvalid)
	}
	_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{MaxReplays: -1})
	assert.ErrorIs(t, err, dlqops.ErrInvalid)
}

func TestReplayRealSleepIsPaced(t *testing.T) {
	e := newEnv(t, reads()...)
	e.ops.Sleep, e.ops.Now = nil, nil
	start := time.Now()
	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Rate: 40})
	require.NoError(t, err)
	assert.Equal(t, 5, sum.Replayed)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "5 reads at 40/s take at least 4 intervals")
}

func TestReplayProgressBar(t *testing.T) {
	e := newEnv(t, reads()...)
	e.ops.Terminal = true
	_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	out := e.out.String()
	assert.Contains(t, out, "\r[####................] 1/5")
	assert.Contains(t, out, "\r[####################] 5/5\n")
	assert.True(t, strings.HasSuffix(out, "\nreplayed 5, skipped as duplicate 0, skipped at max replays 0, failed 0\n"), "%q", out)

	e = newEnv(t, reads()...)
	_, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.NotContains(t, e.out.String(), "\r", "no bar unless Terminal")
}

// TestReplayReport pins the report docs/DLQ.md shows: after a canary
// (--limit 1) replayed seq 1, read 2 is at max replays, read 4's subject is
// stored by another stream, and read 5 was republished by a run that crashed
// before deleting its copy. The progress bar counts the canary's mark (seq
// 6) among the messages examined.
func TestReplayReport(t *testing.T) {
	rs := reads()
	rs[1].header = nats.Header{dlqops.HeaderReplayCount: {"3"}}
	rs[3].subject = "other.reads.north"
	e := newEnv(t, rs...)
	_, err := e.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
	require.NoError(t, err)
	crashed, err := dlqops.ReplayMsg(dlqName, copyEntry(t, e, 5))
	require.NoError(t, err)
	_, err = e.js.PublishMsg(t.Context(), crashed)
	require.NoError(t, err)
	e.ops.Terminal = true

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Limit: 1}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 1, Replayed: 1}, sum)
	assert.Equal(t, "replayed 1, skipped as duplicate 0, skipped at max replays 0, failed 0\n", e.out.String())

	e.out.Reset()
	sum, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 4, Replayed: 1, Duplicates: 1, SkippedMaxReplays: 1, Failed: 1}, sum)
	const clear = "\r                          \r"
	assert.Equal(t, ""+
		"seq 2: skipped, replayed 3 times already (--max-replays 3); copy kept\n"+
		"\r[####................] 1/5"+
		"\r[########............] 2/5"+clear+
		"seq 4: not replayed, copy kept: publish to other.reads.north: not a subject of the source stream: stream METER_READS takes meter.reads.>\n"+
		"\r[########............] 2/5"+
		"\r[############........] 3/5"+
		"\r[################....] 4/5"+
		"\r[####################] 5/5\n"+ // the canary's mark, seq 6, is examined too
		"replayed 1, skipped as duplicate 1, skipped at max replays 1, failed 1\n", e.out.String())
	assert.Equal(t, []uint64{2, 4}, e.copies())
	assert.Len(t, e.sourceMsgs(), 3, "reads 1, 3 and 5, each once")
}

// A copy truncated to fit the dead-letter stream is replayed with the full
// read, taken from the source stream where it stays after its TERM; when
// the full read is gone, the copy is kept and the reason said.
func TestReplayOfATruncatedCopyUsesTheFullRead(t *testing.T) {
	e := newEnv(t)
	full := append(payload("MTR-9"), bytes.Repeat([]byte(" "), 2000)...)
	ack, err := e.js.Publish(t.Context(), "meter.reads.north", full)
	require.NoError(t, err)
	copyOf := func(seq uint64) {
		m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: srcName,
			Subject: "meter.reads.north", Sequence: seq, Data: full}, base)
		truncated, err := dlq.Fit(m, 1500)
		require.NoError(t, err)
		require.True(t, truncated)
		_, err = e.js.PublishMsg(t.Context(), m)
		require.NoError(t, err)
	}
	copyOf(ack.Sequence)
	copyOf(ack.Sequence + 100) // its full read is not in the source stream

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Replayed: 1, Failed: 1}, sum)
	assert.Contains(t, e.out.String(), "seq 2: not replayed, copy kept: truncated copy; the full read is no longer in METER_READS at sequence 101")
	msgs := e.sourceMsgs()
	require.Len(t, msgs, 2)
	assert.Equal(t, full, msgs[1].Data, "the full read, not the truncated copy")
	assert.Empty(t, msgs[1].Header.Get(dlq.HeaderTruncated))
	assert.Equal(t, []uint64{2}, e.copies())
}

// After the source stream was deleted and re-created, the read at a
// truncated copy's Dlq-Sequence is another read, even of the same size and
// subject: its stream timestamp is not the copy's Dlq-Published-At, so it
// is not replayed in the copy's place.
func TestReplayOfATruncatedCopyDoesNotTakeAnotherReadAtItsSequence(t *testing.T) {
	e := newEnv(t)
	full := append(payload("MTR-9"), bytes.Repeat([]byte(" "), 2000)...)
	ack, err := e.js.Publish(t.Context(), "meter.reads.north", full)
	require.NoError(t, err)
	m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: srcName,
		Subject: "meter.reads.north", Sequence: ack.Sequence, PublishedAt: base, Data: full}, base)
	truncated, err := dlq.Fit(m, 1500)
	require.NoError(t, err)
	require.True(t, truncated)
	_, err = e.js.PublishMsg(t.Context(), m)
	require.NoError(t, err)

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 1, Failed: 1}, sum)
	assert.Contains(t, e.out.String(), "is another read, stored ")
	assert.Len(t, e.sourceMsgs(), 1, "nothing replayed")
	assert.Equal(t, []uint64{1}, e.copies(), "the copy is kept")
}

// A rate is at least one message an hour: slower, the interval between two
// replays overflowed a duration and paced nothing (1e-300 replayed 4 reads
// in 40ms).
func TestReplayRateHasAFloor(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		ok   bool
	}{{0, true}, {dlqops.MinRate, true}, {10, true}, {dlqops.MinRate / 2, false}, {1e-300, false}, {-1, false}, {math.Inf(1), false}} {
		err := dlqops.ReplayOptions{Rate: tc.rate}.Validate()
		if tc.ok {
			assert.NoError(t, err, "%v", tc.rate)
			continue
		}
		assert.ErrorIs(t, err, dlqops.ErrInvalid, "%v", tc.rate)
	}
	err := dlqops.ReplayOptions{Rate: 1e-300}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want at least one message an hour")
}
