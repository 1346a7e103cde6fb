package stream_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/stream"
)

// counter finds one child of a metric vector by its label pairs.
func counter(t *testing.T, e *env, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "probe"})
			c.Add(v)
			return c
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return nil
}

func TestMetricsLint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	stream.NewMetrics(reg)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	n, err := testutil.GatherAndCount(reg,
		"meter_consumer_messages_total", "meter_consumer_failures_total",
		"meter_consumer_dead_letters_total", "meter_consumer_dead_letter_publish_errors_total",
		"meter_consumer_retry_delay_seconds", "meter_consumer_handle_duration_seconds",
		"meter_consumer_delivery_attempt", "meter_consumer_in_flight")
	require.NoError(t, err)
	assert.Greater(t, n, 8, "every label value is initialised")
}

// counterGauge reads a gauge (through the same probe as counter).
func counterGauge(t *testing.T, e *env, name string, labels ...string) prometheus.Collector {
	t.Helper()
	return counter(t, e, name, labels...)
}

func TestAutoPullBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		concurrency      int
		handler, ackWait time.Duration
		want             int
	}{
		{32, 6 * time.Second, 30 * time.Second, 128},     // the binary's defaults: 4 rounds
		{32, 10 * time.Second, 30 * time.Second, 64},     // 3 rounds would reach the ack wait
		{8, 6 * time.Second, 30 * time.Second, 32},       // scales with the workers
		{4, 1800 * time.Millisecond, 2 * time.Second, 4}, // one round only
		{1, 0, 30 * time.Second, 4},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, stream.AutoPullBatch(tt.concurrency, tt.handler, tt.ackWait), "%+v", tt)
	}
}

func TestRefillAt(t *testing.T) {
	t.Parallel()
	tests := []struct{ batch, concurrency, want int }{
		{128, 32, 32}, // the binary's defaults: a refill asks for 96 or more
		{64, 32, 32},  // half the batch: nats.go's own default
		{32, 32, 16},
		{33, 32, 17},
		{16, 4, 4},
		{1, 1, 1},
		{4, 1, 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, stream.RefillAt(tt.batch, tt.concurrency), "%+v", tt)
	}
}
