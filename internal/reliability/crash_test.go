package reliability_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 1: a downstream outage of ten times the whole retry budget.
func TestOutageTenTimesTheRetryBudget(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	fixedServer(t, port, t.TempDir())
	w := newWorld(t, url(port))
	e, heal := outageEngine(t)
	// Budget: 50+100+200+400+400ms ceilings, under 1.2s; the outage lasts 12s.
	startConsumer(t, "consumer", "--nats-url", w.url, "--create-streams", "--downstream-url", e.srv.URL,
		"--breaker-window", "2s", "--breaker-min-calls", "5", "--breaker-cool-down", "500ms",
		"--breaker-max-cool-down", "1s", "--breaker-probes", "1")
	began := time.Now()
	for i := 0; time.Since(began) < 12*time.Second; i++ {
		body, key := read("OUT", i)
		w.publishBody("meter.reads.OUT", body, key, nil)
		time.Sleep(40 * time.Millisecond)
	}
	heal()
	recovered := time.Now()
	w.settled(60 * time.Second)
	f := w.checkLedger(e, nil, 0)
	f.Recovery = time.Since(recovered)
	f.log(t, "outage")
}

// Scenario 2: SIGKILL in the middle of a batch, then a restart.
func TestKilledMidBatchThenRestarted(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	fixedServer(t, port, t.TempDir())
	w := newWorld(t, url(port))
	e := newEngine(t, nil)
	e.setLatency(20 * time.Millisecond)
	c := startConsumer(t, "first", "--nats-url", w.url, "--create-streams", "--downstream-url", e.srv.URL, "--concurrency", "8")
	w.publish("KIL", 400, 0)
	require.Eventually(t, func() bool { d, _ := e.delivered(); return len(d) >= 100 }, 30*time.Second, 5*time.Millisecond)
	c.Kill()
	killed := time.Now()
	startConsumer(t, "second", "--nats-url", w.url, "--downstream-url", e.srv.URL, "--concurrency", "8")
	w.settled(60 * time.Second)
	f := w.checkLedger(e, nil, 0)
	f.Recovery = time.Since(killed)
	f.log(t, "sigkill")
}

// Scenario 3: SIGTERM with reads in flight.
func TestSigtermWithReadsInFlight(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	fixedServer(t, port, t.TempDir())
	w := newWorld(t, url(port))
	e := newEngine(t, nil)
	e.setLatency(300 * time.Millisecond)
	c := startConsumer(t, "first", "--nats-url", w.url, "--create-streams", "--downstream-url", e.srv.URL, "--concurrency", "16")
	w.publish("TRM", 200, 0)
	require.Eventually(t, func() bool { _, calls := e.delivered(); return calls >= 20 }, 30*time.Second, 5*time.Millisecond)
	code, took := c.Term(10 * time.Second)
	assert.Equal(t, 0, code, "clean exit")
	assert.Less(t, took, 5*time.Second+2*time.Second, "within the shutdown timeout")
	stopped := time.Now()
	e.setLatency(0)
	startConsumer(t, "second", "--nats-url", w.url, "--downstream-url", e.srv.URL)
	w.settled(60 * time.Second)
	f := w.checkLedger(e, nil, 0)
	f.Recovery = time.Since(stopped)
	t.Logf("shutdown took %s", took.Round(time.Millisecond))
	f.log(t, "sigterm")
}

// Scenario 4: the NATS server restarts (same store) under a running consumer.
func TestServerRestartUnderTheConsumer(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	s := fixedServer(t, port, dir)
	w := newWorld(t, url(port))
	e := newEngine(t, nil)
	e.setLatency(5 * time.Millisecond)
	c := startConsumer(t, "consumer", "--nats-url", w.url, "--create-streams", "--downstream-url", e.srv.URL)
	w.publish("RST", 100, 2*time.Millisecond)
	s.Shutdown()
	s.WaitForShutdown()
	restarted := time.Now()
	fixedServer(t, port, dir)
	w.publish("RST2", 100, 2*time.Millisecond)
	w.settled(60 * time.Second)
	f := w.checkLedger(e, nil, 0)
	f.Recovery = time.Since(restarted)
	assert.GreaterOrEqual(t, c.Count("reconnected to NATS"), 1)
	f.log(t, "server-restart")
}

// Scenario 6: the dead-letter stream is unavailable while permanent
// failures arrive.
func TestDeadLetterStreamUnavailable(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	fixedServer(t, port, t.TempDir())
	w := newWorld(t, url(port))
	e := newEngine(t, func(key string, _ int) int {
		if strings.HasPrefix(key, "BAD") {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	})
	p := startConsumer(t, "consumer", "--nats-url", w.url, "--create-streams", "--downstream-url", e.srv.URL)
	cfg, err := w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	info, err := cfg.Info(t.Context())
	require.NoError(t, err)
	require.NoError(t, w.js.DeleteStream(t.Context(), "METER_READS_DLQ"))

	w.publish("BAD", 20, 0)
	w.publish("GOOD", 20, 0)
	require.Eventually(t, func() bool {
		d, _ := e.delivered()
		return len(d) == 20
	}, 30*time.Second, 10*time.Millisecond, "good reads keep flowing")
	// Every failing copy is tried more than once, and the originals stay.
	require.Eventually(t, func() bool { return p.Count("dead-letter copy not confirmed; read NAKed, not terminated") >= 40 },
		30*time.Second, 10*time.Millisecond)
	c, err := w.js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)
	ci, err := c.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 20, ci.NumAckPending+int(ci.NumPending), "the 20 originals are not let go")

	back := time.Now()
	_, err = w.js.CreateStream(t.Context(), info.Config)
	require.NoError(t, err)
	w.settled(60 * time.Second)
	f := w.checkLedger(e, func(k string) bool { return strings.HasPrefix(k, "BAD") }, 20)
	f.Recovery = time.Since(back)
	f.log(t, "dlq-unavailable")
}

// outageEngine answers 503 to everything until heal is called.
func outageEngine(t *testing.T) (e *engine, heal func()) {
	var down atomic.Bool
	down.Store(true)
	e = newEngine(t, func(string, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	return e, func() { down.Store(false) }
}
