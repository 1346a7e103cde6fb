package dlqops_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

func TestShow(t *testing.T) {
	e := newEnv(t, reads()...)
	require.NoError(t, e.ops.Show(t.Context(), 1))
	out := e.out.String()
	assert.True(t, strings.HasPrefix(out, "seq 1 in METER_READS_DLQ, subject meter.dlq.meter.reads.north\n"), out)
	for _, h := range []string{
		"Dlq-Reason: permanent", "Dlq-Cause: http_422", "Dlq-Subject: meter.reads.north", "Dlq-Sequence: 101",
		"Dlq-Error: http_422: downstream answered 422 Unprocessable Entity",
		"Dlq-Original-Msg-Id: he-1", "Nats-Msg-Id: dlq:METER_READS:101:1796011140000000000", "X-Head-End: he-7\nX-Head-End: he-8",
	} {
		assert.Contains(t, out, h+"\n")
	}
	assert.Less(t, strings.Index(out, "Dlq-Cause:"), strings.Index(out, "Dlq-Reason:"), "headers are sorted")
	assert.Less(t, strings.Index(out, "Nats-Msg-Id:"), strings.Index(out, "X-Head-End:"), "headers are sorted")
	assert.True(t, strings.HasSuffix(out, "\npayload (91 bytes):\n"+string(payload("MTR-1"))+"\n"), out)

	e.out.Reset()
	require.NoError(t, e.ops.Show(t.Context(), 3))
	assert.Contains(t, e.out.String(), "payload (12 bytes, not UTF-8, base64):\n/yBub3QgYSByZWFk\n")
}

func TestShowMissingSequence(t *testing.T) {
	e := newEnv(t, reads()...)
	require.NoError(t, e.dlq.DeleteMsg(t.Context(), 2))
	for _, seq := range []uint64{2, 99} {
		err := e.ops.Show(t.Context(), seq)
		require.ErrorIs(t, err, dlqops.ErrNoSuchSequence)
		assert.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		assert.Contains(t, err.Error(), fmt.Sprintf("sequence %d in METER_READS_DLQ", seq))
	}
	assert.EqualError(t, e.ops.Show(t.Context(), 99), "sequence 99 in METER_READS_DLQ: no such sequence (see consumer dlq list): "+
		"nats: API error: code=404 err_code=10037 description=message not found", "as docs/DLQ.md shows it")
}

// A truncated copy says where the full read is.
func TestShowATruncatedCopy(t *testing.T) {
	e := newEnv(t)
	m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "invalid_payload", Stream: srcName,
		Subject: "meter.reads.north", Sequence: 77, Data: []byte(strings.Repeat("x", 3000))}, base)
	_, err := dlq.Fit(m, 2000)
	require.NoError(t, err)
	_, err = e.js.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	require.NoError(t, e.ops.Show(t.Context(), 1))
	assert.Contains(t, e.out.String(), "payload truncated to fit the dead-letter stream: ")
	assert.Contains(t, e.out.String(), " of 3000 bytes; the full read is in stream METER_READS at sequence 77")
}
