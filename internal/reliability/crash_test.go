package reliability_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 1: a downstream outage of ten times the whole retry budget.
func TestOutageTenTimesTheRetryBudget(t *testing.T) {
	t.Parallel()
	policy, heal := outage()
	// Budget: 50+100+200+400+400ms ceilings, under 1.2s; the outage lasts 12s.
	s := newScenario(t, setup{policy: policy, args: []string{
		"--breaker-window", "2s", "--breaker-min-calls", "5", "--breaker-cool-down", "500ms",
		"--breaker-max-cool-down", "1s", "--breaker-probes", "1",
	}})
	began := time.Now()
	for i := 0; time.Since(began) < 12*time.Second; i++ {
		body, key := read("OUT", i)
		s.publishBody("meter.reads.OUT", body, key, nil)
		time.Sleep(40 * time.Millisecond)
	}
	heal()
	recovered := time.Now()
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(recovered)
	f.log(t, "outage")
}

// Scenario 2: SIGKILL in the middle of a batch, then a restart.
func TestKilledMidBatchThenRestarted(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{latency: 20 * time.Millisecond, consumers: []string{"first"}, args: []string{"--concurrency", "8"}})
	s.publish("KIL", 400, 0)
	require.Eventually(t, func() bool { d, _ := s.engine.delivered(); return len(d) >= 100 }, 30*time.Second, 5*time.Millisecond)
	s.consumer.Kill()
	killed := time.Now()
	s.start("second", "--concurrency", "8")
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(killed)
	f.log(t, "sigkill")
}

// Scenario 3: SIGTERM with reads in flight.
func TestSigtermWithReadsInFlight(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{latency: 300 * time.Millisecond, consumers: []string{"first"}, args: []string{"--concurrency", "16"}})
	s.publish("TRM", 200, 0)
	require.Eventually(t, func() bool { _, calls := s.engine.delivered(); return calls >= 20 }, 30*time.Second, 5*time.Millisecond)
	code, took := s.consumer.Term(10 * time.Second)
	assert.Equal(t, 0, code, "clean exit")
	assert.Less(t, took, 5*time.Second+2*time.Second, "within the shutdown timeout")
	stopped := time.Now()
	s.engine.setLatency(0)
	s.start("second")
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(stopped)
	t.Logf("shutdown took %s", took.Round(time.Millisecond))
	f.log(t, "sigterm")
}

// Scenario 4: the NATS server restarts (same store) under a running consumer.
func TestServerRestartUnderTheConsumer(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{latency: 5 * time.Millisecond})
	s.publish("RST", 100, 2*time.Millisecond)
	s.nats.Shutdown()
	restarted := time.Now()
	s.nats.Restart()
	s.publish("RST2", 100, 2*time.Millisecond)
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(restarted)
	assert.GreaterOrEqual(t, s.consumer.Count("reconnected to NATS"), 1)
	f.log(t, "server-restart")
}

// Scenario 6: the dead-letter stream is unavailable while permanent
// failures arrive.
func TestDeadLetterStreamUnavailable(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{policy: func(key string, _ int) int {
		if strings.HasPrefix(key, "BAD") {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}})
	cfg, err := s.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	info, err := cfg.Info(t.Context())
	require.NoError(t, err)
	require.NoError(t, s.js.DeleteStream(t.Context(), "METER_READS_DLQ"))

	s.publish("BAD", 20, 0)
	s.publish("GOOD", 20, 0)
	require.Eventually(t, func() bool {
		d, _ := s.engine.delivered()
		return len(d) == 20
	}, 30*time.Second, 10*time.Millisecond, "good reads keep flowing")
	// Every failing copy is tried more than once, and the originals stay.
	require.Eventually(t, func() bool {
		return s.consumer.Count("dead-letter copy not confirmed; read NAKed, not terminated") >= 40
	}, 30*time.Second, 10*time.Millisecond)
	c, err := s.js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)
	ci, err := c.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 20, ci.NumAckPending+int(ci.NumPending), "the 20 originals are not let go")

	back := time.Now()
	_, err = s.js.CreateStream(t.Context(), info.Config)
	require.NoError(t, err)
	s.settled(60 * time.Second)
	f := s.checkLedger(func(k string) bool { return strings.HasPrefix(k, "BAD") }, 20)
	f.Recovery = time.Since(back)
	f.log(t, "dlq-unavailable")
}
