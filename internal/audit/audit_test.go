package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
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
