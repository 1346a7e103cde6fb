package dlq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
)

func TestPublishIsConfirmedAndIdempotent(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	st, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "METER_READS_DLQ", Subjects: []string{"meter.dlq.>"}, Duplicates: 20 * time.Minute,
	})
	require.NoError(t, err)
	p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ"})
	e := dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "http_422", Stream: "METER_READS",
		Subject: "meter.reads.north", Sequence: 5, Data: []byte("x")}

	e.PublishedAt = time.Date(2026, 11, 30, 6, 0, 0, 120, time.UTC)
	require.NoError(t, p.Publish(t.Context(), e))
	require.NoError(t, p.Publish(t.Context(), e), "a second copy is a confirmed duplicate")
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs)

	// As stored: no Nats-Expected-* header (the copy keeps none, its own
	// publish's included), and its times with all nine digits.
	m, err := st.GetMsg(t.Context(), 1)
	require.NoError(t, err)
	for name := range m.Header {
		assert.False(t, strings.HasPrefix(name, "Nats-Expected-"), "stored with the copy: %s", name)
	}
	assert.Equal(t, "2026-11-30T06:00:00.000000120Z", m.Header.Get(dlq.HeaderPublishedAt))
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`, m.Header.Get(dlq.HeaderDeadLetteredAt))
}

func TestPublishWithoutStreamIsNotConfirmed(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ", Timeout: time.Second})
	err := p.Publish(t.Context(), dlq.Entry{Subject: "meter.reads.north", Sequence: 1})
	assert.ErrorIs(t, err, dlq.ErrPublish)

	// A stream that exists but is not the expected one does not count either.
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"meter.dlq.>"}})
	require.NoError(t, err)
	err = p.Publish(t.Context(), dlq.Entry{Subject: "meter.reads.north", Sequence: 1})
	assert.ErrorIs(t, err, dlq.ErrPublish)
}

func dlqStream(t *testing.T, js jetstream.JetStream, maxMsgSize int32) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "METER_READS_DLQ", Subjects: []string{"meter.dlq.>"}, Duplicates: 20 * time.Minute, MaxMsgSize: maxMsgSize,
	})
	require.NoError(t, err)
	return st
}

// A read published in an atomic batch carries Nats-Batch-* headers; a copy
// that kept them would be refused by the dead-letter stream every time.
func TestCopyOfABatchedReadIsStored(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	st := dlqStream(t, js, 0)
	p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ", Timeout: time.Second})
	err := p.Publish(t.Context(), dlq.Entry{Reason: dlq.ReasonPermanent, Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 3,
		Header: nats.Header{"Nats-Batch-Id": {"b-1"}, "Nats-Batch-Sequence": {"2"}, "Nats-Batch-Commit": {"1"}, "Nats-Incr": {"+1"}},
		Data:   []byte(`{}`)})
	require.NoError(t, err)
	m, err := st.GetMsg(t.Context(), 1)
	require.NoError(t, err)
	assert.Empty(t, m.Header.Get("Nats-Batch-Id"))
	assert.Equal(t, "Nats-Batch-Commit,Nats-Batch-Id,Nats-Batch-Sequence,Nats-Incr", m.Header.Get(dlq.HeaderDroppedHeaders))
}

func TestOversizedCopy(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	st := dlqStream(t, js, 4096)
	big := []byte(strings.Repeat("x", 4000)) // fits the stream alone, not with the Dlq-* headers
	e := dlq.Entry{Reason: dlq.ReasonPermanent, Cause: "payload_too_large", Stream: "METER_READS",
		Subject: "meter.reads.north", Sequence: 9, Data: big}

	t.Run("refused when the source stream does not keep the read", func(t *testing.T) {
		p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ", MaxSize: 4096})
		err := p.Publish(t.Context(), e)
		assert.ErrorIs(t, err, dlq.ErrTooLarge)
		assert.ErrorIs(t, err, dlq.ErrRejected)
		assert.ErrorIs(t, err, dlq.ErrPublish)
	})
	t.Run("without a known limit the server rejects it", func(t *testing.T) {
		p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ", Timeout: time.Second})
		err := p.Publish(t.Context(), e)
		assert.ErrorIs(t, err, dlq.ErrRejected, "an answer from the server, not a timeout")
	})
	t.Run("truncated, saying so", func(t *testing.T) {
		p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ", MaxSize: 4096, Truncate: true})
		require.NoError(t, p.Publish(t.Context(), e))
		info, err := st.Info(t.Context())
		require.NoError(t, err)
		m, err := st.GetMsg(t.Context(), info.State.LastSeq)
		require.NoError(t, err)
		assert.Equal(t, "true", m.Header.Get(dlq.HeaderTruncated))
		assert.Equal(t, "4000", m.Header.Get(dlq.HeaderOriginalSize))
		assert.Equal(t, "9", m.Header.Get(dlq.HeaderSequence), "where the full read is")
		assert.Less(t, len(m.Data), 4000)
		assert.Equal(t, big[:len(m.Data)], m.Data)
	})
}

// Once the duplicate window has forgotten a copy's message id, the copy is
// found by its provenance headers.
func TestStoredFindsACopy(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	dlqStream(t, js, 0)
	p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ"})
	from := time.Now().Add(-time.Minute)
	for seq := range uint64(300) { // other copies on the same subject, before and after
		if seq == 150 {
			continue
		}
		require.NoError(t, p.Publish(t.Context(), dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.north", Sequence: seq}))
	}
	require.NoError(t, p.Publish(t.Context(), dlq.Entry{Stream: "OTHER", Subject: "meter.reads.north", Sequence: 150}))
	to := time.Now().Add(time.Minute)

	found, err := p.Stored(t.Context(), dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 150}, from, to)
	require.NoError(t, err)
	assert.False(t, found.Copy, "same sequence, other stream")
	found, err = p.Stored(t.Context(), dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 299}, from, to)
	require.NoError(t, err)
	assert.True(t, found.Copy)
	found, err = p.Stored(t.Context(), dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.south", Sequence: 299}, from, to)
	require.NoError(t, err)
	assert.False(t, found.Copy, "another subject")
	found, err = p.Stored(t.Context(), dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 299}, to, to.Add(time.Minute))
	require.NoError(t, err)
	assert.False(t, found.Copy, "stored before the span")
	assert.Empty(t, lookupConsumers(t, js), "every look-up's consumer is deleted after use")
}

// A copy of another read at the same stream and sequence (stored before the
// stream was deleted and re-created) is not the read's copy: the read is
// told apart by its stream timestamp, on the copy's Dlq-Published-At and in
// its message id.
func TestStoredTellsReadsAtOneSequenceApart(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	dlqStream(t, js, 0)
	p := dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: "meter.dlq", Stream: "METER_READS_DLQ"})
	from := time.Now().Add(-time.Minute)
	before := dlq.Entry{Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 1, PublishedAt: time.Date(2026, 11, 30, 6, 0, 0, 1, time.UTC)}
	after := before
	after.PublishedAt = before.PublishedAt.Add(time.Hour)
	require.NoError(t, p.Publish(t.Context(), before))
	to := time.Now().Add(time.Minute)

	found, err := p.Stored(t.Context(), after, from, to)
	require.NoError(t, err)
	assert.Equal(t, dlq.Found{Others: 1}, found, "the earlier read's copy is not the later read's")
	require.NoError(t, p.Publish(t.Context(), after))
	found, err = p.Stored(t.Context(), after, from, to)
	require.NoError(t, err)
	assert.True(t, found.Copy, "the later read's copy is a copy of its own, not a duplicate")
	found, err = p.Stored(t.Context(), before, from, to)
	require.NoError(t, err)
	assert.True(t, found.Copy)
	assert.Empty(t, lookupConsumers(t, js))
}

// lookupConsumers lists the consumers of the dead-letter stream.
func lookupConsumers(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	st, err := js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	var names []string
	for n := range st.ConsumerNames(t.Context()).Name() {
		names = append(names, n)
	}
	return names
}
