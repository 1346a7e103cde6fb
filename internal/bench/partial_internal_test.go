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

// The account mix is exact. refusal answers each kind's failures at once,
// 0 letting the call be served; answer gives them once served, and 200 for
// the rest.
func TestRefusalAndAnswerByKind(t *testing.T) {
	kinds := accountMix.kinds(1000, 3)
	assert.Equal(t, 50, count(kinds, throttled))
	assert.Equal(t, 950, count(kinds, healthy))

	all := []readKind{healthy, failOnce, tooMany, alwaysBad, throttled}
	refuse, ans := refusal(all), answer(all)
	tests := []struct {
		read                  int
		wantFirst, wantSecond int
		wantRetryAfter        string
	}{
		{0, 0, 0, ""},
		{1, http.StatusServiceUnavailable, 0, ""},
		{2, http.StatusTooManyRequests, 0, "1"},
		{3, http.StatusServiceUnavailable, http.StatusServiceUnavailable, ""},
		{4, http.StatusTooManyRequests, 0, "60"},
		{99, 0, 0, ""}, // a read of no kind: served
	}
	orOK := func(status int) int { return max(status, http.StatusOK) }
	for _, tt := range tests {
		first, h := refuse(Key(tt.read), 1)
		second, _ := refuse(Key(tt.read), 2)
		assert.Equal(t, tt.wantFirst, first, "read %d", tt.read)
		assert.Equal(t, tt.wantSecond, second, "read %d", tt.read)
		assert.Equal(t, tt.wantRetryAfter, h.Get("Retry-After"), "read %d", tt.read)
		first, h = ans(Key(tt.read), 1)
		second, _ = ans(Key(tt.read), 2)
		assert.Equal(t, orOK(tt.wantFirst), first, "answer, read %d", tt.read)
		assert.Equal(t, orOK(tt.wantSecond), second, "answer, read %d", tt.read)
		assert.Equal(t, tt.wantRetryAfter, h.Get("Retry-After"), "answer, read %d", tt.read)
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
	dead := map[int]string{2: "exhausted"}
	var run EngineCell
	partialOutcome{ledger: ledger, kinds: kinds, start: t0, elapsed: time.Second, naks: naks,
		deadLettered: func(i int) (string, bool) { r, ok := dead[i]; return r, ok }}.measure(&run)

	assert.True(t, run.GoodputDone)
	assert.InDelta(t, 2/0.12, run.Goodput, 1e-9, "2 healthy reads, the last answered at 100+20ms")
	assert.Equal(t, []int{1, 3, 3, 1}, []int{run.AlwaysBad, run.AlwaysCallsMin, run.AlwaysCallsMax, run.AlwaysExhausted})
	assert.Zero(t, run.BillableDeadLettered, "the always-503 read dead-lettered is not billable")
	// Late: read 1 80-15-50 = 15ms; read 2 60-10-40 = 10ms, 300-70-200 = 30ms.
	assert.Equal(t, Lateness{Count: 3, Percentiles: Percentiles{P50: 15 * time.Millisecond, P90: 30 * time.Millisecond,
		P99: 30 * time.Millisecond, Max: 30 * time.Millisecond}}, run.Lateness)
}

func TestPartialOutcomeNotDrained(t *testing.T) {
	kinds := []readKind{healthy, healthy, alwaysBad, failOnce}
	ledger := map[string][]simengine.Call{Key(0): {{At: time.Unix(1, 0), Outcome: simengine.Billed}}}
	var run EngineCell
	partialOutcome{ledger: ledger, kinds: kinds, start: time.Unix(0, 0), elapsed: 4 * time.Second, naks: newNakCapture(),
		deadLettered: func(i int) (string, bool) { return "", i == 3 }}.measure(&run)
	assert.False(t, run.GoodputDone)
	assert.InDelta(t, 0.25, run.Goodput, 1e-9, "over the deadline, when some healthy read was not billed")
	require.Equal(t, 1, run.AlwaysBad)
	assert.Zero(t, run.AlwaysCallsMax)
	assert.Equal(t, 1, run.BillableDeadLettered)
}
