package lag_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
)

func TestReadExportsTheBacklog(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "METER_READS", Subjects: []string{"meter.reads.>"}})
	require.NoError(t, err)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "METER_READS_DLQ", Subjects: []string{"meter.dlq.>"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(t.Context(), "METER_READS", jetstream.ConsumerConfig{Durable: "meter-consumer", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	for range 5 {
		_, err := js.Publish(t.Context(), "meter.reads.x", []byte("{}"))
		require.NoError(t, err)
	}
	_, err = js.Publish(t.Context(), "meter.dlq.meter.reads.x", []byte("{}"))
	require.NoError(t, err)
	batch, err := cons.Fetch(2)
	require.NoError(t, err)
	for range batch.Messages() {
	}

	reg := prometheus.NewRegistry()
	r := lag.New(lag.JetStream{JS: js, Stream: "METER_READS", Durable: "meter-consumer", DLQName: "METER_READS_DLQ"},
		reg, time.Minute, retry.NewRand(1), nil)
	require.NoError(t, r.Read(t.Context()))
	want := map[string]float64{
		"meter_consumer_pending_messages":            3,
		"meter_consumer_ack_pending_messages":        2,
		"meter_consumer_redelivered_messages":        0,
		"meter_consumer_dead_letter_stream_messages": 1,
		"meter_consumer_lag_read_errors_total":       0,
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	assert.Equal(t, want, got)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

type failing struct{ calls chan struct{} }

func (f failing) ConsumerInfo(context.Context) (*jetstream.ConsumerInfo, error) {
	f.calls <- struct{}{}
	return nil, context.DeadlineExceeded
}
func (failing) DeadLetterInfo(context.Context) (*jetstream.StreamInfo, error) { return nil, nil }

func TestRunIsJitteredAndStops(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := failing{calls: make(chan struct{}, 100)}
	r := lag.New(src, reg, 20*time.Millisecond, retry.NewRand(1), nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return len(src.calls) >= 3 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.GreaterOrEqual(t, testutil.ToFloat64(errorsCounter(t, reg)), 3.0)
}

func errorsCounter(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "meter_consumer_lag_read_errors_total" {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatal("no errors counter")
	return nil
}
