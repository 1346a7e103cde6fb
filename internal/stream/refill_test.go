package stream_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/stream"
)

// The pull requests the server gets while a backlog drains: the first
// asks for the batch, every refill for the batch less the at most
// RefillAt-1 reads still in the client buffer, never more than the batch.
// With nats.go's default threshold (half the batch) the refills would ask
// for 17 of 32.
func TestRefillsAskForAllButOneReadPerWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var mu sync.Mutex
	var batches []int
	sub, err := e.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+e.topo.Stream+"."+e.topo.Durable, func(m *nats.Msg) {
		var req struct {
			Batch int `json:"batch"`
		}
		if json.Unmarshal(m.Data, &req) == nil {
			mu.Lock()
			batches = append(batches, req.Batch)
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, e.nc.Flush())

	const n = 600
	for i := range n {
		e.publish("meter.reads.m1", read("m1", i), nil)
	}
	o := e.options(1)
	o.PullBatch = 32 // Concurrency 8: refills at fewer than 8 buffered
	e.start(o)
	e.settled(30 * time.Second)
	require.Equal(t, n, e.re.total())

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(batches), n/32, "every read was pulled: %v", batches)
	assert.Equal(t, 32, batches[0], "the first pull asks for the batch")
	low := 32 - (stream.RefillAt(32, 8) - 1)
	for i, b := range batches {
		assert.True(t, b >= low && b <= 32, "pull %d asked for %d, not %d-32: %v", i, b, low, batches)
	}
	assert.LessOrEqual(t, len(batches), n/low+3, "pull requests for %d reads: %v", n, batches)
}
