package bench

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/simengine"
)

func TestMixKindsAreExactAndSeeded(t *testing.T) {
	kinds := partialMix.kinds(10_000, 7)
	count := map[readKind]int{}
	for _, k := range kinds {
		count[k]++
	}
	assert.Equal(t, map[readKind]int{healthy: 7700, failOnce: 1500, tooMany: 300, alwaysBad: 500}, count)
	assert.Equal(t, kinds, partialMix.kinds(10_000, 7), "the same seed, the same reads")
	assert.NotEqual(t, kinds, partialMix.kinds(10_000, 8))
	assert.Equal(t, make([]readKind, 100), healthyMix.kinds(100, 7))
}

func TestAnswerByKind(t *testing.T) {
	a := answer([]readKind{healthy, failOnce, tooMany, alwaysBad})
	tests := []struct {
		give       int // read
		wantFirst  int
		wantSecond int
	}{
		{0, http.StatusOK, http.StatusOK},
		{1, http.StatusServiceUnavailable, http.StatusOK},
		{2, http.StatusTooManyRequests, http.StatusOK},
		{3, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		first, h := a(Key(tt.give), 1)
		second, _ := a(Key(tt.give), 2)
		assert.Equal(t, tt.wantFirst, first, "read %d", tt.give)
		assert.Equal(t, tt.wantSecond, second, "read %d", tt.give)
		if tt.wantFirst == http.StatusTooManyRequests {
			assert.Equal(t, "1", h.Get("Retry-After"))
		}
	}
}

func TestPartialOutcome(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	served := func(arrive, latency int, out simengine.Outcome) simengine.Call {
		return simengine.Call{At: at(arrive), Latency: time.Duration(latency) * time.Millisecond, Outcome: out}
	}
	kinds := []readKind{healthy, failOnce, alwaysBad, healthy}
	ledger := map[string][]simengine.Call{
		Key(0): {served(0, 10, simengine.Billed)},
		// Fails at 5+10, asked 50ms, called again at 80: 15ms late.
		Key(1): {served(5, 10, simengine.Refused), served(80, 10, simengine.Billed)},
		// Three calls, each failing.
		Key(2): {served(0, 10, simengine.Refused), served(60, 10, simengine.Refused), served(300, 10, simengine.Refused)},
		Key(3): {served(100, 20, simengine.Billed)},
	}
	naks := newNakCapture()
	naks.delays[2] = []asked{{at: at(16), delay: 50 * time.Millisecond}}
	naks.delays[3] = []asked{{at: at(11), delay: 40 * time.Millisecond}, {at: at(71), delay: 200 * time.Millisecond}}
	run := partialOutcome{ledger: ledger, kinds: kinds, start: t0, elapsed: time.Second, naks: naks,
		deadLettered: func(i int) bool { return i == 2 }}.measure()

	assert.Equal(t, 2, run.Healthy)
	assert.Equal(t, 2, run.HealthyBilled)
	assert.True(t, run.HealthyDone)
	assert.Equal(t, 120*time.Millisecond, run.HealthyElapsed, "the last healthy read answered at 100+20")
	assert.InDelta(t, 2/0.12, run.Goodput, 1e-9)
	assert.Equal(t, 1, run.AlwaysBad)
	assert.Equal(t, []int{3, 3}, []int{run.AlwaysCallsMin, run.AlwaysCallsMax})
	assert.Zero(t, run.BillableDeadLettered, "the always-503 read dead-lettered is not billable")
	// Late: read 1 80-15-50 = 15ms; read 2 60-10-40 = 10ms, 300-70-200 = 30ms.
	assert.Equal(t, Lateness{Count: 3, Percentiles: Percentiles{P50: 15 * time.Millisecond, P90: 30 * time.Millisecond,
		P99: 30 * time.Millisecond, Max: 30 * time.Millisecond}}, run.Lateness)
}

func TestPartialOutcomeNotDrained(t *testing.T) {
	kinds := []readKind{healthy, healthy, alwaysBad}
	ledger := map[string][]simengine.Call{Key(0): {{At: time.Unix(1, 0), Outcome: simengine.Billed}}}
	run := partialOutcome{ledger: ledger, kinds: kinds, start: time.Unix(0, 0), elapsed: 4 * time.Second, naks: newNakCapture(),
		deadLettered: func(int) bool { return false }}.measure()
	assert.False(t, run.HealthyDone)
	assert.Equal(t, 4*time.Second, run.HealthyElapsed, "the deadline, when some healthy read was not billed")
	assert.InDelta(t, 0.25, run.Goodput, 1e-9)
	require.Equal(t, 1, run.AlwaysBad)
	assert.Zero(t, run.AlwaysCallsMax)
}
