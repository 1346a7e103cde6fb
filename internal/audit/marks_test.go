package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

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
	assert.Contains(t, text.String(), "inferred: settled at or below the ack floor, no copy, no mark (assumes deliver policy all and a filter covering the stream")
}
