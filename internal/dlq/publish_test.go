package dlq_test

import (
	"testing"
	"time"

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

	require.NoError(t, p.Publish(t.Context(), e))
	require.NoError(t, p.Publish(t.Context(), e), "a second copy is a confirmed duplicate")
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs)
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
