package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

// TestAuditReportsEachFinding plants every finding the audit knows on a
// real server and checks that it reports each, exactly, and nothing else:
// by sequences and by stream timestamps, sorting in memory and spilling
// every record to disk.
func TestAuditReportsEachFinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(12)
	e.settle(12, map[uint64]action{5: deadLetter, 9: deadLetter, 10: twoCopies, 12: hold})
	ctx := t.Context()
	// Read 1 leaves the stream's head, 6 and 7 are deleted inside it, and
	// 9, dead-lettered, too: its copy (dead-letter seq 2) has no original.
	require.NoError(t, e.src.Purge(ctx, jetstream.WithPurgeSequence(2)))
	for _, seq := range []uint64{6, 7, 9} {
		require.NoError(t, e.src.DeleteMsg(ctx, seq))
	}
	// The engine billed 2, 4 (twice), 8 and 11, not 3, and a key no read has.
	led := []string{key(2), key(4), key(4), key(8), key(11), "GHOST-1"}

	tests := []struct {
		name   string
		period audit.Period
		mem    int
		aged   got
	}{
		{"by sequence", audit.Period{FromSeq: 1, ToSeq: 12}, 0, got{Kind: audit.KindAgedOut, Seq: 1, ToSeq: 1}},
		{"by time", audit.Period{Since: e.at[1], Until: e.at[12]}, 0, got{Kind: audit.KindAgedOut, ToSeq: 1}},
		{"by sequence, spilling every record", audit.Period{FromSeq: 1, ToSeq: 12}, 1, got{Kind: audit.KindAgedOut, Seq: 1, ToSeq: 1}},
		{"by time, spilling every record", audit.Period{Since: e.at[1], Until: e.at[12]}, 1, got{Kind: audit.KindAgedOut, ToSeq: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.auditor(tt.mem).Run(ctx, tt.period, ledger(led...))
			require.NoError(t, err)
			defer res.Close()
			assert.Equal(t, []got{
				tt.aged,
				{Kind: audit.KindMissing, Seq: 6, ToSeq: 7},
				{Kind: audit.KindMissing, Seq: 9, ToSeq: 9},
				{Kind: audit.KindCopyWithoutOriginal, Seq: 9, DLQSeqs: []uint64{2}},
				{Kind: audit.KindDuplicateCopies, Seq: 10, Key: key(10), DLQSeqs: []uint64{3, 4}},
				{Kind: audit.KindUnsettled, Seq: 12, Key: key(12)},
				{Kind: audit.KindUnknownKey, Key: "GHOST-1"},
				{Kind: audit.KindNotInLedger, Seq: 3, Key: key(3)},
				{Kind: audit.KindBilledTwice, Key: key(4)},
			}, findings(t, res))
			s := res.Summary
			assert.False(t, res.Explained())
			assert.Equal(t, uint64(8), s.Reads, "2 3 4 5 8 10 11 12")
			assert.Equal(t, uint64(5), s.Acked, "2 3 4 8 11")
			assert.Equal(t, uint64(4), s.Billed, "2 4 8 11: 3 is not in the engine's ledger")
			assert.Equal(t, audit.BasisLedger, s.BilledBasis)
			assert.Equal(t, uint64(2), s.DeadLettered, "5 10")
			assert.Equal(t, []audit.ReasonCause{{Reason: "permanent", Cause: "http_422", Count: 2}}, s.ByReasonCause)
			assert.Equal(t, uint64(1), s.Unsettled)
			require.NotNil(t, s.OldestUnsettled)
			assert.Equal(t, uint64(12), s.OldestUnsettled.Seq)
			assert.Equal(t, uint64(3), s.Missing)
			assert.Equal(t, uint64(11), s.AckFloor)
			assert.Equal(t, uint64(2), s.FirstSeq)
			assert.Equal(t, uint64(12), s.LastSeq)
			require.NotNil(t, s.Ledger)
			assert.Equal(t, audit.LedgerSummary{Name: "ledger.txt", Entries: 6, Keys: 5, NotBilled: 1, Unknown: 1, Repeated: 1}, *s.Ledger)
			if tt.mem == 1 {
				assert.Positive(t, s.Spilled, "the copies were sorted on disk")
			}

			var out bytes.Buffer
			require.NoError(t, res.WriteJSON(&out))
			var doc struct {
				Explained    bool
				Findings     []audit.Finding
				DeadLettered []audit.DeadLettered `json:"dead_lettered"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
			assert.False(t, doc.Explained)
			assert.Len(t, doc.Findings, 9)
			require.Len(t, doc.DeadLettered, 2)
			assert.Equal(t, []uint64{5, 10}, []uint64{doc.DeadLettered[0].Seq, doc.DeadLettered[1].Seq})
			assert.Equal(t, []uint64{1, 3}, []uint64{doc.DeadLettered[0].DLQSeq, doc.DeadLettered[1].DLQSeq})
		})
	}
}

// TestAuditCleanPeriod: every read billed or dead-lettered once, the
// ledger has exactly the billed keys: explained.
func TestAuditCleanPeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(5)
	e.settle(5, map[uint64]action{4: deadLetter})
	for _, p := range []audit.Period{{FromSeq: 1, ToSeq: 5}, {Since: e.at[1], Until: e.at[5]}} {
		res, err := e.auditor(0).Run(t.Context(), p, ledger(key(1), key(2), key(3), key(5)))
		require.NoError(t, err)
		assert.Empty(t, findings(t, res), p)
		assert.True(t, res.Explained())
		assert.Equal(t, uint64(4), res.Summary.Billed)
		assert.Equal(t, uint64(1), res.Summary.DeadLettered)
		var out bytes.Buffer
		require.NoError(t, res.WriteText(&out))
		assert.Contains(t, out.String(), "every read of the period is explained")
		res.Close()
	}
}

// TestAuditTellsAnEarlierStreamsCopy: the stream is deleted and re-created;
// the copy of the read stored at sequence 1 before is not the copy of the
// read stored there now, which was billed.
func TestAuditTellsAnEarlierStreamsCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(1)
	e.settle(1, map[uint64]action{1: deadLetter})
	require.NoError(t, e.js.DeleteStream(t.Context(), srcName))
	e.createSource()
	e.publish(1)
	e.settle(1, nil)

	res, err := e.auditor(0).Run(t.Context(), audit.Period{FromSeq: 1, ToSeq: 1}, ledger(key(1)))
	require.NoError(t, err)
	defer res.Close()
	assert.Empty(t, findings(t, res))
	assert.Equal(t, uint64(1), res.Summary.Billed)
	assert.Zero(t, res.Summary.DeadLettered)
	assert.Equal(t, 1, res.Summary.EarlierCopies)
}

// TestAuditGapsAtThePeriodsEdges: a gap is reported by the period of the
// read before it; a period by sequence reports its own edges.
func TestAuditGapsAtThePeriodsEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(8)
	e.settle(8, nil)
	for _, seq := range []uint64{4, 8} {
		require.NoError(t, e.src.DeleteMsg(t.Context(), seq))
	}
	tests := []struct {
		name  string
		give  audit.Period
		reads uint64
		want  []got
	}{
		{"by time, the gap after its last read", audit.Period{Since: e.at[1], Until: e.at[3]}, 3,
			[]got{{Kind: audit.KindMissing, Seq: 4, ToSeq: 4}}},
		{"by time, not the gap before its first read; the stream's deleted tail", audit.Period{Since: e.at[5], Until: e.at[8]}, 3,
			[]got{{Kind: audit.KindMissing, Seq: 8, ToSeq: 8}}},
		{"by sequence, both edges", audit.Period{FromSeq: 4, ToSeq: 8}, 3,
			[]got{{Kind: audit.KindMissing, Seq: 4, ToSeq: 4}, {Kind: audit.KindMissing, Seq: 8, ToSeq: 8}}},
		{"by sequence, past the stream's end", audit.Period{FromSeq: 5, ToSeq: 100}, 3,
			[]got{{Kind: audit.KindMissing, Seq: 8, ToSeq: 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.auditor(0).Run(t.Context(), tt.give, nil)
			require.NoError(t, err)
			defer res.Close()
			assert.Equal(t, tt.want, findings(t, res))
			assert.Equal(t, tt.reads, res.Summary.Reads)
			assert.Equal(t, tt.reads, res.Summary.Billed)
		})
	}
}

// TestAuditIgnoresOtherStreamsCopies: a copy of another stream's read at
// the same sequence and timestamp is not a copy of this stream's read.
func TestAuditIgnoresOtherStreamsCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(2)
	e.settle(2, nil)
	other := dlq.Build(prefix, dlq.Entry{Reason: dlq.ReasonPermanent, Cause: classify.Cause("http_422"),
		Stream: "OTHER_READS", Consumer: durable, Subject: "meter.reads.r1", Sequence: 1, PublishedAt: e.at[1], Data: []byte("{}")}, e.at[1])
	_, err := e.js.PublishMsg(t.Context(), other, jetstream.WithExpectStream(dlqName))
	require.NoError(t, err)
	res, err := e.auditor(0).Run(t.Context(), audit.Period{Since: e.at[1], Until: e.at[2].Add(time.Second)}, ledger(key(1), key(2)))
	require.NoError(t, err)
	defer res.Close()
	assert.Empty(t, findings(t, res))
	assert.Equal(t, uint64(2), res.Summary.Billed)
	assert.Zero(t, res.Summary.DeadLettered)
}

// A read replayed from the dead-letter stream (its copy deleted by `dlq
// replay`) is replayed, never billed: the audit follows the mark the
// replay leaves to the new read, which is accounted for on its own: billed,
// dead-lettered again, or not yet settled. A purged read is purged, by whom,
// when and why. Both go through the real `consumer dlq` operations.
func TestAuditFollowsReplaysAndPurges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(5)
	e.settle(5, map[uint64]action{2: deadLetter, 3: deadLetter, 4: deadLetter, 5: deadLetter})
	ctx := t.Context()
	ops := &dlqops.Ops{JS: e.js, Stream: dlqName, SourceStream: srcName, Actor: "ops-alice", IdleWait: 200 * time.Millisecond}
	for _, m := range []string{"MTR-2", "MTR-3", "MTR-4"} { // replayed as 6, 7 and 8
		sum, err := ops.Replay(ctx, dlqops.ReplayOptions{Filter: dlqops.Filter{Meter: m}, Rate: 1000})
		require.NoError(t, err)
		require.Equal(t, 1, sum.Replayed, m)
	}
	n, err := ops.Purge(ctx, dlqops.Filter{Meter: "MTR-5"}, "meter decommissioned", func(int) bool { return true })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// The replays: 6 billed, 7 fails again, 8 still in flight.
	e.settle(3, map[uint64]action{7: deadLetter, 8: hold})

	res, err := e.auditor(0).Run(ctx, audit.Period{FromSeq: 1, ToSeq: 8}, ledger(key(1), key(2)))
	require.NoError(t, err)
	defer res.Close()
	s := res.Summary
	assert.Equal(t, uint64(8), s.Reads)
	assert.Equal(t, uint64(2), s.Billed, "1, and 6 (2's replay)")
	assert.Equal(t, uint64(2), s.Acked)
	assert.Equal(t, uint64(3), s.Replayed, "2, 3, 4")
	assert.Equal(t, uint64(1), s.Purged, "5")
	assert.Equal(t, uint64(1), s.DeadLettered, "7 (3's replay, failed again)")
	assert.Equal(t, uint64(1), s.Unsettled, "8 (4's replay)")
	assert.Equal(t, []got{{Kind: audit.KindUnsettled, Seq: 8, Key: key(4)}}, findings(t, res),
		"nothing billed without its key in the ledger: the replayed and purged originals are not billed")

	var marked []audit.Marked
	require.NoError(t, res.Marked(func(m audit.Marked) error { marked = append(marked, m); return nil }))
	require.Len(t, marked, 4)
	for i, want := range []struct {
		seq, as uint64
		mark    string
	}{{2, 6, "replayed"}, {3, 7, "replayed"}, {4, 8, "replayed"}, {5, 0, "purged"}} {
		assert.Equal(t, want.seq, marked[i].Seq)
		assert.Equal(t, want.mark, marked[i].Mark)
		assert.Equal(t, want.as, marked[i].ReplayedAs)
		assert.Equal(t, "ops-alice", marked[i].By)
		assert.False(t, marked[i].At.IsZero())
	}
	assert.Equal(t, "meter decommissioned", marked[3].Why)

	var text bytes.Buffer
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), "replayed                       3")
	assert.Contains(t, text.String(), "purged                         1")
	assert.Regexp(t, `5\s+purged\s+-\s+ops-alice\s+\S+\s+meter decommissioned`, text.String())
	var out bytes.Buffer
	require.NoError(t, res.WriteJSON(&out))
	var doc struct {
		Marked []audit.Marked `json:"marked"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Len(t, doc.Marked, 4)
}

// Without a ledger, billed is inferred from the ack floor, and the report
// says so and what the inference assumes.
func TestAuditSaysWhatBilledRestsOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(2)
	e.settle(2, nil)
	res, err := e.auditor(0).Run(t.Context(), audit.Period{FromSeq: 1, ToSeq: 2}, nil)
	require.NoError(t, err)
	defer res.Close()
	assert.Equal(t, audit.BasisAckFloor, res.Summary.BilledBasis)
	assert.Equal(t, uint64(2), res.Summary.Billed)
	var text bytes.Buffer
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), "inferred: settled at or below the ack floor, no copy, no mark (assumes deliver policy all and a filter covering the stream; give --engine-ledger to check)", "the hint names the flag the binary has")
}

// A read settled without a copy whose payload has no key cannot be in the
// engine's ledger: a finding, and, as a keyed read missing from the ledger,
// not counted billed (the summary said billed 1 beside the finding).
func TestAuditDoesNotCountAKeylessReadBilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(1)
	_, err := e.js.Publish(t.Context(), "meter.reads.r0", []byte(`not a read`))
	require.NoError(t, err)
	e.settle(2, nil)
	res, err := e.auditor(0).Run(t.Context(), audit.Period{FromSeq: 1, ToSeq: 2}, ledger(key(1)))
	require.NoError(t, err)
	defer res.Close()
	assert.Equal(t, []got{{Kind: audit.KindNotInLedger, Seq: 2}}, findings(t, res))
	assert.Equal(t, uint64(2), res.Summary.Acked)
	assert.Equal(t, uint64(1), res.Summary.Billed, "read 1 only")
	require.NotNil(t, res.Summary.Ledger)
	assert.Equal(t, uint64(1), res.Summary.Ledger.NotBilled)
}

// A stream every read has left (aged out, or purged whole) holds no first
// read to compare a period with: a period up to its last read's time is not
// explained (it said every read of the period was), one after it is.
func TestAuditOfAStreamEveryReadLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(3)
	e.settle(3, nil)
	require.NoError(t, e.src.Purge(t.Context()))
	res, err := e.auditor(0).Run(t.Context(), audit.Period{Since: e.at[1], Until: e.at[3]}, nil)
	require.NoError(t, err)
	defer res.Close()
	assert.Equal(t, []got{{Kind: audit.KindAgedOut, ToSeq: 3}}, findings(t, res))
	assert.False(t, res.Explained())
	assert.Equal(t, uint64(3), res.Summary.AgedOut)

	later := e.at[3].Add(time.Hour)
	res2, err := e.auditor(0).Run(t.Context(), audit.Period{Since: later, Until: later.Add(time.Hour)}, nil)
	require.NoError(t, err)
	defer res2.Close()
	assert.Empty(t, findings(t, res2))
	assert.True(t, res2.Explained())
	var out bytes.Buffer
	require.NoError(t, res2.WriteJSON(&out))
	assert.Contains(t, out.String(), `"by_reason_cause":[]`, "an empty list, as the others, not null")
}
