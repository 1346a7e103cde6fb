package dlqops_test

import (
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

// publishedAt is the original's stream timestamp the fixture gives read r.
func publishedAt(r read) time.Time { return base.Add(-r.ago).Add(-time.Minute) }

// A replay marks each replayed copy before it deletes it: the read as the
// copy named it, the copy's sequence, the replay's sequence in the source
// stream, who and when. The tools leave the marks out.
func TestReplayLeavesAMark(t *testing.T) {
	e := newEnv(t, reads()...)
	e.ops.Actor = "ops-alice"
	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Cause: "http_422"}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Replayed: 2}, sum)
	assert.Equal(t, []uint64{2, 3, 4}, e.copies(), "the replayed copies are gone")

	replayedAs := map[string]uint64{} // Dlq-Replayed-From -> sequence in the source stream
	for _, m := range e.sourceMsgs() {
		replayedAs[m.Header.Get(dlqops.HeaderReplayedFrom)] = m.Sequence
	}
	rs := reads()
	marks := e.marks()
	require.Len(t, marks, 2, "one mark per replayed copy")
	for i, want := range []struct {
		copySeq uint64
		r       read
	}{{1, rs[0]}, {5, rs[4]}} {
		m := marks[i]
		assert.Equal(t, "meter.dlq._mark."+want.r.subject, m.subject)
		assert.Equal(t, dlq.MarkReplayed, m.Kind)
		assert.Equal(t, srcName, m.Stream)
		assert.Equal(t, want.r.seq, m.Sequence)
		assert.Equal(t, want.r.subject, m.Subject)
		assert.True(t, publishedAt(want.r).Equal(m.PublishedAt), "%v", m.PublishedAt)
		assert.Equal(t, want.copySeq, m.CopySequence)
		require.Contains(t, replayedAs, strconv.FormatUint(want.copySeq, 10))
		assert.Equal(t, replayedAs[strconv.FormatUint(want.copySeq, 10)], m.ReplayedAs, "the new read's sequence in the source stream")
		assert.Equal(t, "ops-alice", m.By)
		assert.False(t, m.At.Before(base), "%v", m.At)
		assert.Empty(t, m.Why)
	}

	// list, stats, a second replay and a purge leave the marks alone.
	e.out.Reset()
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{}, false))
	assert.Equal(t, []uint64{2, 3, 4}, tableSeqs(t, e.out.String()))
	s, err := e.ops.CollectStats(t.Context(), dlqops.Filter{})
	require.NoError(t, err)
	assert.Equal(t, 3, s.Total)
	assert.Equal(t, map[string]int{"http_503": 1, "invalid_payload": 1, "timeout": 1}, s.ByCause)
	sum, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Cause: "http_422"}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{}, sum, "a mark is not replayed")
	assert.Len(t, e.sourceMsgs(), 2)

	// show prints a mark as it is, and says what it is.
	e.out.Reset()
	require.NoError(t, e.ops.Show(t.Context(), marks[0].seq))
	assert.Contains(t, e.out.String(), "subject meter.dlq._mark.meter.reads.north\n\na mark, not a dead-lettered read: the copy at seq 1 was replayed\n")
	assert.Contains(t, e.out.String(), "Dlq-Marked-By: ops-alice\n")
}

// A purge marks each purged copy before it deletes it, with who and why;
// without a name the mark says unknown. A scan of headers only (no meter
// filter) keeps what the marks need.
func TestPurgeLeavesAMark(t *testing.T) {
	tests := []struct {
		name, actor, wantBy string
		f                   dlqops.Filter
		purged              []uint64 // dead-letter sequences: read i+1 of the fixture is at seq i+1
	}{
		{"headers only", "ops-bob", "ops-bob", dlqops.Filter{Cause: "http_422"}, []uint64{1, 5}},
		{"payloads, no name", "", "unknown", dlqops.Filter{Meter: "MTR-1"}, []uint64{1, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, reads()...)
			e.ops.Actor = tt.actor
			n, err := e.ops.Purge(t.Context(), tt.f, "head-end resent them\nticket 7", func(int) bool { return true })
			require.NoError(t, err)
			require.Equal(t, 2, n)
			assert.Len(t, e.copies(), 3)

			rs := reads()
			marks := e.marks()
			require.Len(t, marks, 2, "one mark per purged copy")
			for i, copySeq := range tt.purged {
				m, r := marks[i], rs[copySeq-1]
				assert.Equal(t, "meter.dlq._mark."+r.subject, m.subject)
				assert.Equal(t, dlq.MarkPurged, m.Kind)
				assert.Equal(t, srcName, m.Stream)
				assert.Equal(t, r.seq, m.Sequence)
				assert.Equal(t, r.subject, m.Subject)
				assert.True(t, publishedAt(r).Equal(m.PublishedAt), "%v", m.PublishedAt)
				assert.Equal(t, copySeq, m.CopySequence)
				assert.Zero(t, m.ReplayedAs)
				assert.Equal(t, tt.wantBy, m.By)
				assert.True(t, base.Equal(m.At), "%v", m.At)
				assert.Equal(t, "head-end resent them ticket 7", m.Why, "on one line")
			}

			// Purging everything purges the copies, not the marks.
			e.out.Reset()
			n, err = e.ops.Purge(t.Context(), dlqops.Filter{}, "", func(n int) bool { assert.Equal(t, 3, n); return true })
			require.NoError(t, err)
			assert.Equal(t, 3, n)
			assert.Empty(t, e.copies())
			assert.Len(t, e.marks(), 5)
			e.out.Reset()
			require.NoError(t, e.ops.Stats(t.Context(), dlqops.Filter{}, false))
			assert.Equal(t, "no dead-lettered reads in METER_READS_DLQ match\n", e.out.String())
			e.out.Reset()
			require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{}, true))
			assert.Empty(t, e.out.String())
		})
	}
}

// refuseMarks narrows the dead-letter stream to the copies' subjects
// (meter.dlq.meter.>), so that a mark (meter.dlq._mark.>) is not stored in
// it: with another stream, one stored elsewhere, and the expected-stream
// check refuses it; without, nobody answers the publish.
func (e *env) refuseMarks(other bool) {
	e.t.Helper()
	cfg := e.dlq.CachedInfo().Config
	cfg.Subjects = []string{"meter.dlq.meter.>"}
	_, err := e.js.UpdateStream(e.t.Context(), cfg)
	require.NoError(e.t, err)
	if other {
		_, err = e.js.CreateStream(e.t.Context(), jetstream.StreamConfig{Name: "MARKS", Subjects: []string{"meter.dlq._mark.>"}})
		require.NoError(e.t, err)
	}
}

// acceptMarks undoes refuseMarks.
func (e *env) acceptMarks() {
	e.t.Helper()
	if err := e.js.DeleteStream(e.t.Context(), "MARKS"); err != nil {
		require.ErrorIs(e.t, err, jetstream.ErrStreamNotFound)
	}
	cfg := e.dlq.CachedInfo().Config
	cfg.Subjects = []string{"meter.dlq.>"}
	_, err := e.js.UpdateStream(e.t.Context(), cfg)
	require.NoError(e.t, err)
}

// A replay whose mark is not stored keeps the copy and says that running it
// again is safe; the next run, marks stored, counts the republish as the
// duplicate it is, marks and deletes the copy.
func TestReplayMarkNotStoredKeepsTheCopy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		other   bool
		wantErr string
	}{
		{"another stream takes marks", true, "expected stream does not match"},
		{"no stream takes marks", false, "no response from stream"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, reads()[:2]...)
			e.refuseMarks(tt.other)
			sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
			require.NoError(t, err)
			assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Failed: 2}, sum)
			assert.Equal(t, []uint64{1, 2}, e.copies(), "copies kept")
			assert.Empty(t, e.marks())
			lines := strings.Split(strings.TrimSpace(e.out.String()), "\n")
			require.Len(t, lines, 3, e.out.String())
			assert.True(t, strings.HasPrefix(lines[0], "seq 1: replayed as METER_READS seq 1, but its mark was not stored; copy kept "+
				"(running the replay again is safe: the republish is a duplicate within METER_READS's duplicate window, "+
				"the mark a duplicate by its id): publish mark to meter.dlq._mark.meter.reads.north: "), lines[0])
			assert.Contains(t, lines[0], tt.wantErr)
			assert.True(t, strings.HasPrefix(lines[1], "seq 2: replayed as METER_READS seq 2, but its mark was not stored; copy kept "), lines[1])
			assert.Equal(t, "replayed 0, skipped as duplicate 0, skipped at max replays 0, failed 2", lines[2])
			if tt.other {
				marks, err := e.js.Stream(t.Context(), "MARKS")
				require.NoError(t, err)
				assert.Zero(t, marks.CachedInfo().State.Msgs, "the expected stream refused them")
			}

			e.acceptMarks()
			e.out.Reset()
			sum, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
			require.NoError(t, err)
			assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Duplicates: 2}, sum)
			assert.Empty(t, e.copies())
			assert.Len(t, e.sourceMsgs(), 2, "each read once")
			marks := e.marks()
			require.Len(t, marks, 2)
			assert.Equal(t, []uint64{1, 2}, []uint64{marks[0].ReplayedAs, marks[1].ReplayedAs}, "the replays stored by the first run")
		})
	}
}

// A purge whose mark is not stored keeps the copy, goes on with the rest,
// and fails.
func TestPurgeMarkNotStoredKeepsTheCopy(t *testing.T) {
	e := newEnv(t, reads()[:2]...)
	e.refuseMarks(false)
	n, err := e.ops.Purge(t.Context(), dlqops.Filter{}, "", func(int) bool { return true })
	require.EqualError(t, err, "purge METER_READS_DLQ: 2 selected reads not deleted, their copies kept (see above)")
	assert.Zero(t, n)
	lines := strings.Split(strings.TrimSpace(e.out.String()), "\n")
	require.Len(t, lines, 3, e.out.String())
	assert.True(t, strings.HasPrefix(lines[0], "seq 1: not deleted, copy kept: its mark was not stored: publish mark to meter.dlq._mark.meter.reads.north: "), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "seq 2: not deleted, copy kept: its mark was not stored: "), lines[1])
	assert.Equal(t, "deleted 0 dead-lettered reads from METER_READS_DLQ", lines[2])
	assert.Equal(t, []uint64{1, 2}, e.copies())
}

// A copy whose subject is not <prefix>.<Dlq-Subject> cannot be marked: it
// is neither replayed nor purged.
func TestACopyThatCannotBeMarkedIsKept(t *testing.T) {
	e := newEnv(t, reads()[:2]...)
	m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: srcName,
		Subject: "meter.reads.north", Sequence: 300, Data: payload("MTR-9")}, base)
	m.Subject = "meter.dlq.elsewhere"
	_, err := e.js.PublishMsg(t.Context(), m)
	require.NoError(t, err)

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Meter: "MTR-9"}})
	require.NoError(t, err)
	assert.Equal(t, dlqops.ReplaySummary{Selected: 1, Failed: 1}, sum)
	assert.Contains(t, e.out.String(), `seq 3: not replayed, copy kept: its subject "meter.dlq.elsewhere" does not end with its original subject "meter.reads.north" (Dlq-Subject), so it cannot be marked`+"\n")
	assert.Empty(t, e.sourceMsgs())

	e.out.Reset()
	n, err := e.ops.Purge(t.Context(), dlqops.Filter{}, "", func(int) bool { return true })
	require.Error(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, `seq 3: not deleted, copy kept: its subject "meter.dlq.elsewhere" does not end with its original subject "meter.reads.north" (Dlq-Subject), so it cannot be marked
deleted 2 dead-lettered reads from METER_READS_DLQ
`, e.out.String())
	assert.Equal(t, []uint64{3}, e.copies())
	assert.Len(t, e.marks(), 2)
}

// A run that stored a mark and stopped before deleting the copy (a crash,
// made here by hand) is run again: its mark is a duplicate by its id, so
// each copy has one mark, the first.
func TestARetriedMarkIsADuplicate(t *testing.T) {
	crashed := func(e *env, kind dlq.MarkKind, seq uint64) {
		c := copyEntry(t, e, seq)
		mk := dlq.Mark{Kind: kind, Stream: srcName, Subject: c.Subject, CopySequence: seq, By: "crashed-run", At: base}
		mk.Sequence, _ = strconv.ParseUint(c.Header.Get(dlq.HeaderSequence), 10, 64)
		if kind == dlq.MarkReplayed {
			r, err := dlqops.ReplayMsg(dlqName, c)
			require.NoError(t, err)
			ack, err := e.js.PublishMsg(t.Context(), r, jetstream.WithExpectStream(srcName))
			require.NoError(t, err)
			mk.ReplayedAs = ack.Sequence
		}
		_, err := e.js.PublishMsg(t.Context(), dlq.BuildMark("meter.dlq", mk), jetstream.WithExpectStream(dlqName))
		require.NoError(t, err)
	}
	t.Run("replay", func(t *testing.T) {
		e := newEnv(t, reads()[:2]...)
		e.ops.Actor = "ops-alice"
		crashed(e, dlq.MarkReplayed, 1)
		sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
		require.NoError(t, err)
		assert.Equal(t, dlqops.ReplaySummary{Selected: 2, Replayed: 1, Duplicates: 1}, sum)
		assert.Empty(t, e.copies())
		marks := e.marks()
		require.Len(t, marks, 2)
		assert.Equal(t, []uint64{1, 2}, []uint64{marks[0].CopySequence, marks[1].CopySequence})
		assert.Equal(t, []string{"crashed-run", "ops-alice"}, []string{marks[0].By, marks[1].By})
		assert.Len(t, e.sourceMsgs(), 2)
	})
	t.Run("purge", func(t *testing.T) {
		e := newEnv(t, reads()[:2]...)
		e.ops.Actor = "ops-bob"
		crashed(e, dlq.MarkPurged, 2)
		n, err := e.ops.Purge(t.Context(), dlqops.Filter{}, "", func(int) bool { return true })
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		marks := e.marks()
		require.Len(t, marks, 2)
		assert.Equal(t, []uint64{2, 1}, []uint64{marks[0].CopySequence, marks[1].CopySequence})
		assert.Equal(t, []string{"crashed-run", "ops-bob"}, []string{marks[0].By, marks[1].By})
	})
}

// A mark is told by its Dlq-Mark header, not by its subject: one on a
// copy's subject is left out too.
func TestAMarkIsNotACopyWhereverItIs(t *testing.T) {
	e := newEnv(t, reads()[:1]...)
	mk := dlq.BuildMark("meter.dlq", dlq.Mark{Kind: dlq.MarkPurged, Stream: srcName, Sequence: 9, Subject: "meter.reads.north", CopySequence: 9, At: base})
	mk.Subject = "meter.dlq.meter.reads.north" // a copy's subject
	mk.Header.Set(dlq.HeaderReason, "permanent")
	_, err := e.js.PublishMsg(t.Context(), &nats.Msg{Subject: mk.Subject, Header: mk.Header})
	require.NoError(t, err)
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{}, false))
	assert.Equal(t, []uint64{1}, tableSeqs(t, e.out.String()))
}
