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

// The pull requests the server gets while a backlog drains: each asks for
// the whole batch, one at a time, so there are about as many as batches of
// reads (the next asked only once the last read of the one before is handed
// to a worker: each worker still has a read in hand while it is on its way).
func TestPullsAskForTheBatch(t *testing.T) {
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
	o.PullBatch = 32
	began := time.Now()
	e.start(o)
	e.settled(30 * time.Second)
	took := time.Since(began)
	require.Equal(t, n, e.re.total())

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(batches), n/32, "every read was pulled: %v", batches)
	for i, b := range batches {
		assert.Equal(t, 32, b, "pull %d: %v", i, batches)
	}
	// n/32 full pulls, and an idle one a second (PullExpiry) at most.
	assert.LessOrEqual(t, len(batches), n/32+2+int(took/stream.PullExpiry), "pull requests for %d reads: %v", n, batches)
}
