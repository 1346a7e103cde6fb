package audit_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

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
