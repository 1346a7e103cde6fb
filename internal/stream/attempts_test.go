package stream_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// histogram finds a histogram without labels.
func histogram(t *testing.T, e *env, name string) *dto.Histogram {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("histogram %s not found", name)
	return nil
}

// A delivery lost in transit (the server sent it, no handler got it: here
// fetched and dropped) comes back after the ack wait with one more
// delivery. It reached no call, so it is not an attempt: with two attempts
// and an engine that fails a read's first call and bills its second, the
// read is billed, not dead-lettered "exhausted" after one call.
func TestADeliveryLostInTransitIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(n int, _ string) (int, http.Header) {
		if n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}, func(topo *topology.Topology) { topo.AckWait = time.Second })
	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	batch, err := e.cons.Fetch(1, jetstreamFetchWait())
	require.NoError(t, err)
	for range batch.Messages() { // dropped: neither acked nor NAKed
	}
	o := e.options(320)
	o.Policy.MaxAttempts = 2
	o.HandlerTimeout = 500 * time.Millisecond
	e.start(o)
	e.settled(10 * time.Second)

	assert.Empty(t, e.deadLetters())
	calls := e.re.Calls(key1)
	require.Len(t, calls, 2)
	assert.Equal(t, http.StatusOK, calls[1].Status)
	h := histogram(t, e, "meter_consumer_delivery_attempt")
	assert.Equal(t, 2.0, h.GetSampleSum(), "settled at its second attempt, its third delivery")
	acks := e.logs.byMessage("ack")
	require.Len(t, acks, 1)
	assert.Equal(t, uint64(3), acks[0]["deliveries"].Uint64())
}

// startCrashable runs a consumer on a connection of its own, which crash
// closes at once: what it held is neither settled nor handed back, its
// calls in flight are not recorded, and its buffered reads reach no call
// (they come back after the ack wait with one more delivery each).
func (e *env) startCrashable(o opts) (crash func()) {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.srv)
	cons, err := js.Consumer(e.t.Context(), e.topo.Stream, e.topo.Durable)
	require.NoError(e.t, err)
	kv, err := js.KeyValue(e.t.Context(), e.topo.Bucket())
	require.NoError(e.t, err)
	o.Records = stream.KVRecords{KV: kv}
	o.DeadLetter = dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: e.topo.DLQPrefix, Stream: e.topo.DLQStream, Timeout: time.Second})
	c, err := stream.New(o.build(e.t))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx, cons)
	}()
	require.Eventually(e.t, c.Consuming, 5*time.Second, 5*time.Millisecond)
	crash = sync.OnceFunc(func() {
		nc.Close()
		cancel()
		<-done
	})
	e.t.Cleanup(crash)
	return crash
}

// An attempt is a call. A replica that crashes leaves its buffered reads
// uncalled, and one that stops drains its buffer while the server may
// still be sending: either way reads come back with more deliveries than
// calls. Against an engine that fails every read's first call and bills
// its second, with two attempts, crashes and stops under load must not
// dead-letter a read: its deliveries that reached no call are not
// attempts. (Charged by the delivery count, a read whose first delivery
// was lost made its first call as its last attempt, failed it, and was
// dead-lettered "exhausted" after one call.)
func TestCrashesAndStopsChargeNoDeliveryWithoutACall(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(n int, _ string) (int, http.Header) {
		if n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}, func(topo *topology.Topology) { topo.AckWait = 2 * time.Second })
	e.re.setDelay(func(int, string) time.Duration { return 5 * time.Millisecond }) // the workers are the bottleneck
	const reads = 3000
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	options := func(seed uint64) opts {
		o := e.options(seed)
		o.Policy.MaxAttempts = 2
		o.Policy.Base, o.Policy.Cap = 5*time.Millisecond, 20*time.Millisecond
		o.HandlerTimeout = time.Second      // a call timing out under load would be a real failure: none here
		o.Concurrency, o.PullBatch = 16, 64 // pull requests owe this many reads when pulling stops
		return o
	}
	for i := range 8 {
		var end func()
		if i%2 == 0 {
			end = e.startCrashable(options(uint64(200 + i)))
		} else {
			end = e.start(options(uint64(200 + i)))
		}
		time.Sleep(150 * time.Millisecond) // ends at moments unrelated to the reads (a timeline)
		end()
	}
	e.start(options(300))
	e.settled(30 * time.Second)

	assert.Empty(t, e.deadLetters(), "no read dead-lettered for deliveries it was not called for")
	for i := range reads {
		calls := e.re.Calls(keyOf(i))
		if assert.NotEmpty(t, calls, "read %d", i) {
			assert.Equal(t, http.StatusOK, calls[len(calls)-1].Status, "read %d billed", i)
		}
	}
	past := 0
	for _, l := range e.logs.byMessage("ack") {
		if l["deliveries"].Uint64() > 2 {
			past++
		}
	}
	t.Logf("reads acked past their second delivery: %d", past)
}

// Workers behind (a slow engine, few workers): the park fills, pulling
// stops with a drain, and the reads the server was sending are lost in
// transit and come back after the ack wait. Each is settled at its first
// attempt all the same: delivery_attempt counts calls, never deliveries.
func TestAFullParkChargesNoDeliveryWithoutACall(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, func(topo *topology.Topology) { topo.AckWait = 2 * time.Second })
	e.re.setDelay(func(int, string) time.Duration { return 4 * time.Millisecond })
	const reads = 1200
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	o := e.options(310)
	o.Concurrency, o.PullBatch = 2, 16
	o.HandlerTimeout = time.Second
	o.SpillAfter = 5 * time.Millisecond // a read waits little for a worker before it is parked
	e.start(o)
	e.settled(60 * time.Second)

	assert.Empty(t, e.deadLetters())
	redelivered := 0
	for _, l := range e.logs.byMessage("ack") {
		if l["deliveries"].Uint64() > 1 {
			redelivered++
		}
	}
	h := histogram(t, e, "meter_consumer_delivery_attempt")
	assert.Equal(t, uint64(reads), h.GetSampleCount())
	assert.Equal(t, float64(reads), h.GetSampleSum(), "every read settled at its first attempt")
	assert.Equal(t, float64(reads), testutil.ToFloat64(counter(t, e, "meter_consumer_messages_total", "outcome", "ack")))
	t.Logf("reads acked at a later delivery, after one call: %d", redelivered)
}
