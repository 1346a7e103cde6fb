package reliability_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 7: a fleet of three on one durable, one killed mid-run.
func TestFleetSurvivesALostReplica(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{latency: 10 * time.Millisecond, consumers: []string{"a", "b", "c"}, args: []string{"--concurrency", "4"}})
	a, b, c := s.consumers[0], s.consumers[1], s.consumers[2]
	go s.publish("FLT", 600, time.Millisecond)
	require.Eventually(t, func() bool { d, _ := s.engine.delivered(); return len(d) >= 150 }, 30*time.Second, 5*time.Millisecond)
	c.Kill()
	killed := time.Now()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.keys) == 600 }, 60*time.Second, 10*time.Millisecond)
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(killed)
	t.Logf("acks by replica: a=%d b=%d c(killed)=%d", a.Count("ack"), b.Count("ack"), c.Count("ack"))
	assert.Positive(t, a.Count("ack"), "work spreads across the survivors")
	assert.Positive(t, b.Count("ack"), "work spreads across the survivors")
	f.log(t, "fleet")
}

// Scenario 8: a downstream slower than the ack wait would allow without
// in-progress signals causes no duplicate delivery.
func TestSlowDownstreamIsNotDuplicated(t *testing.T) {
	t.Parallel()
	// Ack wait 2s; each call takes 1.3s and 4 workers share 24 reads, so a
	// read waits in the client buffer and then in the call for longer than
	// the ack wait: only in-progress signals keep it from being redelivered.
	s := newScenario(t, setup{latency: 1300 * time.Millisecond, args: []string{
		"--concurrency", "4", "--ack-wait", "2s", "--handler-timeout", "1800ms", "--downstream-timeout", "1700ms",
	}})
	s.publish("SLW", 24, 0)
	s.settled(60 * time.Second)
	f := s.checkLedger(nil, 0)
	assert.Equal(t, 24, f.Calls, "each read called exactly once")
	f.log(t, "slow-downstream")
}

// Scenario 9: hostile input among good reads.
func TestHostileInputIsDeadLetteredPrecisely(t *testing.T) {
	t.Parallel()
	// Room for the 1 MiB payload: a head-end can send what the server takes.
	s := newScenario(t, setup{server: func(o *server.Options) { o.MaxPayload = 4 << 20 }})
	corpus := hostileCorpus()
	require.GreaterOrEqual(t, len(corpus), 50)

	good := 0
	for i, h := range corpus {
		s.publishBody("meter.reads.hostile", h.body, fmt.Sprintf("HOSTILE-%d", i), h.header)
		for range 3 {
			body, key := read("GOOD", good)
			s.publishBody("meter.reads.good", body, key, nil)
			good++
		}
	}
	// Headers with odd values on a valid read are not a reason to refuse it.
	body, key := read("ODD", 0)
	s.publishBody("meter.reads.good", body, key, nats.Header{
		"X-Odd": {strings.Repeat("x", 4000)}, "X-Unicode": {"zähler ⚡"}, "X-Empty": {""}, "X-Many": {"1", "2", "3"},
	})
	s.settled(60 * time.Second)
	f := s.checkLedger(func(k string) bool { return strings.HasPrefix(k, "HOSTILE-") }, len(corpus))

	causes := map[string]int{}
	st, err := s.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	for seq := uint64(1); seq <= uint64(len(corpus)); seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		assert.Equal(t, "permanent", m.Header.Get("Dlq-Reason"))
		causes[m.Header.Get("Dlq-Cause")]++
		i := indexOf(corpus, m.Data)
		require.GreaterOrEqual(t, i, 0, "a dead-letter copy holds the original bytes")
		assert.Equal(t, corpus[i].cause, m.Header.Get("Dlq-Cause"), corpus[i].name)
		assert.Contains(t, m.Header.Get("Dlq-Error"), corpus[i].field, corpus[i].name)
	}
	t.Logf("hostile causes: %v", causes)
	f.log(t, "hostile-input")
}

func indexOf(corpus []hostile, data []byte) int {
	for i, h := range corpus {
		if bytes.Equal(h.body, data) {
			return i
		}
	}
	return -1
}
