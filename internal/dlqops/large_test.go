package dlqops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

// TestManyCopies pages through more copies than one page and one table
// block, with holes left by deleted copies, including the last one.
func TestManyCopies(t *testing.T) {
	const n = 1200
	e := newEnv(t)
	for i := range n {
		cause := "http_503"
		if i%3 == 0 {
			cause = "http_422"
		}
		m := dlq.Build("meter.dlq", dlq.Entry{
			Reason: dlq.ReasonPermanent, Cause: classify.Cause(cause), Stream: srcName,
			Subject: fmt.Sprintf("meter.reads.r%d", i%7), Sequence: uint64(i + 1), Data: payload(fmt.Sprintf("MTR-%d", i)),
		}, base.Add(-time.Hour))
		_, err := e.js.PublishMsgAsync(m)
		require.NoError(t, err)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publish did not complete")
	}
	for _, seq := range []uint64{1, 500, 501, n} {
		require.NoError(t, e.dlq.DeleteMsg(t.Context(), seq))
	}

	// The end is seen from the last copy's pending count, without waiting
	// for a copy that will not come: with an hour's idle wait, a scan that
	// waited would run into the deadline.
	e.ops.IdleWait = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.ops.List(ctx, dlqops.Filter{}, false), "the end is seen without waiting")
	seqs := tableSeqs(t, e.out.String())
	assert.Len(t, seqs, n-4)
	assert.Equal(t, uint64(2), seqs[0])
	assert.Equal(t, uint64(n-1), seqs[len(seqs)-1])
	assert.Equal(t, 3, strings.Count(e.out.String(), "SEQ "), "a header every 500 rows")

	s, err := e.ops.CollectStats(t.Context(), dlqops.Filter{Cause: "http_422"})
	require.NoError(t, err)
	assert.Equal(t, n/3-1, s.Total, "1200/3 minus seq 1")

	e.out.Reset()
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{Meter: "MTR-1000"}, false))
	assert.Equal(t, []uint64{1001}, tableSeqs(t, e.out.String()))

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Subject: "meter.reads.r3"}, Rate: 1e6})
	require.NoError(t, err)
	assert.Equal(t, n/7-1, sum.Replayed, "171 on r3, seq 501 deleted")
	info, err := e.src.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(n/7-1), info.State.Msgs)

	// No scan leaves its ordered consumer behind.
	names := e.dlq.ConsumerNames(t.Context())
	var left []string
	for name := range names.Name() {
		left = append(left, name)
	}
	require.NoError(t, names.Err())
	assert.Empty(t, left)
}
