package stream_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// cutDialer dials the server until cut: then it closes the connection it
// made and refuses to dial again until restored.
type cutDialer struct {
	mu   sync.Mutex
	conn net.Conn
	cut  bool
}

func (d *cutDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
	}
	c, err := net.Dial(network, address)
	d.conn = c
	return c, err
}

func (d *cutDialer) setCut(cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	if cut && d.conn != nil {
		_ = d.conn.Close()
	}
}

// TestAReplicaCutOffPastTheAckWaitDoesNotNakAnotherReplicasDelivery: two
// replicas share the durable. Replica A holds a read for a 4s Retry-After
// when its connection is cut for longer than the ack wait; the server gives
// the read to replica B, whose call takes 1.5s. A comes back and its hold
// ends while B's call is in flight: A must drop its delivery, not NAK it
// (the server does not match a NAK with its delivery: A's would NAK B's,
// and the read would be delivered a third time while B still works on it).
func TestAReplicaCutOffPastTheAckWaitDoesNotNakAnotherReplicasDelivery(t *testing.T) {
	t.Parallel()
	const key = "MTR-1@2026-11-30T06:01:00Z"
	e := newEnvWith(t, func(n int, _ string) (int, http.Header) {
		if n == 1 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": []string{"4"}}
		}
		return http.StatusOK, nil
	}, func(topo *topology.Topology) { topo.AckWait = 3 * time.Second })
	e.re.setDelay(func(n int, _ string) time.Duration {
		if n == 2 {
			return 1500 * time.Millisecond
		}
		return 0
	})

	// Replica A, on a connection that can be cut.
	dialer := &cutDialer{}
	ncA, err := nats.Connect(e.nc.ConnectedUrl(), nats.SetCustomDialer(dialer), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0))
	require.NoError(t, err)
	t.Cleanup(ncA.Close)
	jsA, err := jetstream.New(ncA)
	require.NoError(t, err)
	consA, err := jsA.Consumer(t.Context(), e.topo.Stream, e.topo.Durable)
	require.NoError(t, err)
	regA := prometheus.NewRegistry()
	oA := e.options(45)
	oA.HandlerTimeout = 2500 * time.Millisecond
	oA.Metrics, oA.Conn, oA.Logger = stream.NewMetrics(regA), ncA, slog.New(e.logs)
	oA.DeadLetter = dlq.NewPublisher(jsA, dlq.PublisherOptions{Prefix: e.topo.DLQPrefix, Stream: e.topo.DLQStream, Timeout: time.Second})
	stopA := runOn(t, oA, consA)

	e.publish("meter.reads.north", read("MTR-1", 1), nil)
	require.Eventually(t, func() bool { return gauge(t, regA, "meter_consumer_retry_held") == 1 },
		5*time.Second, time.Millisecond, "A never held the read")
	dialer.setCut(true)
	require.Eventually(t, func() bool { return !ncA.IsConnected() }, 5*time.Second, time.Millisecond)

	// Replica B, on the test's connection, gets the read once A's ack
	// wait ran out.
	oB := e.options(46)
	oB.HandlerTimeout, oB.Conn = 2500*time.Millisecond, e.nc
	// A client timeout well past B's 1.5s call, for a loaded machine.
	oB.Sink, err = downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: e.re.srv.URL, Timeout: 2400 * time.Millisecond, Concurrency: 64})
	require.NoError(t, err)
	e.start(oB)
	require.Eventually(t, func() bool { return len(e.re.Calls(key)) == 2 }, 10*time.Second, time.Millisecond,
		"B never got the read")
	dialer.setCut(false)
	require.Eventually(t, ncA.IsConnected, 5*time.Second, time.Millisecond)

	e.settled(15 * time.Second)
	stopA()
	calls := e.re.Calls(key)
	require.NotEmpty(t, calls)
	assert.Len(t, calls, 2, "B's delivery was NAKed under it: the read was delivered again")
	assert.Equal(t, http.StatusOK, calls[len(calls)-1].Status)
	assert.Equal(t, 1.0, testutil.ToFloat64(findCounter(t, regA, "meter_consumer_leases_lost_total")), "A dropped its delivery")
	assert.Empty(t, e.deadLetters())
}

// runOn runs a consumer with o on cons until the test ends or stop.
func runOn(t *testing.T, o opts, cons jetstream.Consumer) (stop func()) {
	t.Helper()
	c, err := stream.New(o.build(t))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, cons) }()
	require.Eventually(t, c.Consuming, 5*time.Second, 5*time.Millisecond)
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return stop
}

// findCounter returns the metric name (without labels) gathered from reg.
func findCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return counter(t, &env{t: t, reg: reg}, name)
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(findCounter(t, reg, name))
}
