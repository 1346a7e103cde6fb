package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// logBuffer is a JSON log written by the service's goroutines and read by
// the test's.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines whose message starts with prefix.
func (b *logBuffer) lines(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(b.buf.Bytes()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), string(line))
		if msg, _ := m[slog.MessageKey].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// TestRecordsBucketPresentWhileRunning: a replica says at each backlog
// reading whether the records bucket is there, labelled with its stream
// and durable, so that a fleet that never retries still pages when the
// bucket is deleted: no series before the first reading, 1 with the
// bucket, 0 once it is deleted while the service runs (warned of once,
// however many readings find it gone), 1 once it is made again.
func TestRecordsBucketPresentWhileRunning(t *testing.T) {
	t.Parallel()
	cfg, opts := fleetSeven(t)
	topo := service.Topology(cfg)

	var logged logBuffer
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, cfg, service.Deps{Logger: slog.New(slog.NewJSONHandler(&logged, nil)), Registry: reg,
			Rand: retry.NewRand(7), LagInterval: 40 * time.Millisecond})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	const wait, tick = 20 * time.Second, 10 * time.Millisecond
	const name = "meter_consumer_records_bucket_present"
	require.Eventually(t, func() bool {
		return series(t, reg, "meter_consumer_not_consuming")["reason="+service.WhyConnecting] == 1
	}, wait, tick, "NATS does not answer: connecting")
	assert.Empty(t, series(t, reg, name), "a series before the first reading")

	s, err := natstest.Serve(opts)
	require.NoError(t, err)
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	_, js := natstest.Connect(t, s)
	_, err = topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	reads := func(want float64) func() bool {
		return func() bool {
			got, ok := series(t, reg, name)[""] // no label but the stream and durable (checked by series)
			return ok && got == want
		}
	}
	require.Eventually(t, reads(1), wait, tick, "the bucket is there")

	require.NoError(t, js.DeleteKeyValue(t.Context(), topo.Bucket()))
	require.Eventually(t, reads(0), wait, tick, "the bucket deleted while the service runs")
	// Readings go on (each about 40ms apart): let a few more find it gone.
	zeroAt := float64(time.Now().UnixMilli()) / 1000
	require.Eventually(t, func() bool {
		return series(t, reg, "meter_consumer_backlog_read_timestamp_seconds")[""] > zeroAt+0.3
	}, wait, tick, "readings after the bucket was found gone")
	require.True(t, reads(0)(), "still gone")
	gone := logged.lines(t, "the records bucket is gone")
	require.Len(t, gone, 1, "warned of once, not at every reading")
	assert.Equal(t, "WARN", gone[0][slog.LevelKey])
	assert.Equal(t, map[string]any{"bucket": topo.Bucket(), "stream": "METER_READS_7", "durable": "meter-consumer-7"},
		map[string]any{"bucket": gone[0]["bucket"], "stream": gone[0]["stream"], "durable": gone[0]["durable"]})

	_, err = topology.Ensure(t.Context(), js, topo) // as --create-streams would
	require.NoError(t, err)
	require.Eventually(t, reads(1), wait, tick, "the bucket made again")
	assert.Len(t, logged.lines(t, "the records bucket is gone"), 1)
	assert.Zero(t, series(t, reg, "meter_consumer_lag_read_errors_total")[""], "a bucket gone is an answer, not a failed reading")
}
