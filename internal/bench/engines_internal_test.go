package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

func TestLongestChain(t *testing.T) {
	tests := []struct {
		name string
		give retry.Policy
		want time.Duration
	}{
		{"production: 0.5 + 1 + 2 + 4 + 8", productionPolicy().Policy, 15500 * time.Millisecond},
		{"short: 50 + 100 + 200", shortPolicy().Policy, 350 * time.Millisecond},
		{"the cap holds", retry.Policy{Base: time.Second, Cap: 2 * time.Second, MaxAttempts: 5}, 7 * time.Second},
		{"one attempt, no wait", retry.Policy{Base: time.Second, Cap: time.Second, MaxAttempts: 1}, 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, longestChain(tt.give), tt.name)
	}
}

func TestBinomialBand(t *testing.T) {
	tests := []struct {
		name             string
		n                int
		p, k             float64
		mean, low, high  float64
		inside, outsides []int
	}{
		// 3000 reads, 6 attempts at 40%: p = 0.004096, sd = 3.497.
		{"production", 3000, math.Pow(0.4, 6), 3, 12.288, 1.797, 22.779, []int{2, 12, 22}, []int{0, 1, 23}},
		// 3000 reads, 4 attempts: p = 0.0256, sd = 8.651.
		{"short", 3000, math.Pow(0.4, 4), 3, 76.8, 50.85, 102.75, []int{51, 77, 102}, []int{50, 103}},
		{"the low end is never below 0", 10, 0.1, 3, 1, 0, 3.846, []int{0, 3}, []int{4}},
		{"no chance", 100, 0, 3, 0, 0, 0, []int{0}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, lo, hi := binomialBand(tt.n, tt.p, tt.k)
			assert.InDelta(t, tt.mean, mean, 1e-3, "mean")
			assert.InDelta(t, tt.low, lo, 1e-2, "low")
			assert.InDelta(t, tt.high, hi, 1e-2, "high")
			for _, v := range tt.inside {
				assert.True(t, inBand(v, lo, hi), "%d inside [%.2f, %.2f]", v, lo, hi)
			}
			for _, v := range tt.outsides {
				assert.False(t, inBand(v, lo, hi), "%d outside [%.2f, %.2f]", v, lo, hi)
			}
		})
	}
}

func TestRecallGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	kinds := []readKind{healthy, tooMany, tooMany, tooMany, throttled}
	ledger := map[string][]simengine.Call{
		Key(0): {{At: at(0), Outcome: simengine.Billed, Latency: 10 * time.Millisecond}},
		// Rejected at once at 0, called again at 1100: 1.1s.
		Key(1): {{At: at(0), Outcome: simengine.Rejected, Status: 429}, {At: at(1100), Outcome: simengine.Billed}},
		// Refused after 20ms of service at 100, called again at 1120: 1.0s.
		Key(2): {{At: at(100), Outcome: simengine.Refused, Status: 429, Latency: 20 * time.Millisecond}, {At: at(1120), Outcome: simengine.Billed}},
		// Called once: missing.
		Key(3): {{At: at(0), Outcome: simengine.Rejected, Status: 429}},
		Key(4): {{At: at(0), Outcome: simengine.Rejected, Status: 429}, {At: at(5000), Outcome: simengine.Billed}},
	}
	g := recallGaps(ledger, kinds, tooMany)
	assert.Equal(t, Gaps{Count: 2, Missing: 1, Min: time.Second, P50: 1100 * time.Millisecond, Max: 1100 * time.Millisecond}, g)
	assert.False(t, g.within(time.Second, 1500*time.Millisecond), "a read called once misses its target")
	g.Missing = 0
	assert.True(t, g.within(time.Second, 1500*time.Millisecond))
	assert.False(t, g.within(1050*time.Millisecond, 1500*time.Millisecond))
	assert.False(t, g.within(time.Second, 1050*time.Millisecond))

	acct := recallGaps(ledger, kinds, throttled)
	assert.Equal(t, Gaps{Count: 1, Min: 5 * time.Second, P50: 5 * time.Second, Max: 5 * time.Second}, acct)
	assert.True(t, acct.within(5*time.Second, 0), "no upper bound")
	assert.False(t, Gaps{}.within(0, 0), "no gap at all is no evidence")
}

func TestBilledFrom(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	billed := func(ms int) simengine.Call { return simengine.Call{At: at(ms), Outcome: simengine.Billed} }
	ledger := map[string][]simengine.Call{
		"a": {billed(500)},
		"b": {{At: at(900), Outcome: simengine.Rejected}, billed(1500)},
		"c": {billed(2000)},
		"d": {billed(3000), {At: at(3500), Outcome: simengine.Duplicate}},
	}
	assert.InDelta(t, 1.5, billedFrom(ledger, t0, at(1000)), 1e-9, "3 bills answered from 1s on, over 2s")
	assert.InDelta(t, 4/3.0, billedFrom(ledger, t0, at(5000)), 1e-9, "nothing past 5s: the phase from its start")

	count, last := bills(ledger, time.Time{})
	assert.Equal(t, at(3000), last)
	assert.Equal(t, 4, count)
}

// Each kind of cell judges its figures against its targets: the met column
// of its rows, in order (the last row, the state, has no target).
func TestEngineCellTargets(t *testing.T) {
	p := shortPolicy()
	drained := FleetRun{Drained: true, Elapsed: 3 * time.Second, LimitMedian: 32}
	paused := func(n int) FleetRun { r := drained; r.Pauses = n; return r }
	good := Gaps{Count: 90, Min: 1001 * time.Millisecond, P50: 1010 * time.Millisecond, Max: 1200 * time.Millisecond}
	late := Lateness{Count: 100, Percentiles: Percentiles{P99: 60 * time.Millisecond}}
	healthyCell := func(f func(*EngineCell)) EngineCell {
		c := EngineCell{Kind: cellHealthy, Product: drained, Goodput: 950, GoodputDone: true, BareGoodput: 1000, BareDone: true}
		f(&c)
		return c
	}
	mixCell := func(f func(*EngineCell)) EngineCell {
		c := EngineCell{Kind: cellMix, Product: drained, Goodput: 950, GoodputDone: true, BareGoodput: 1000, BareDone: true,
			AlwaysBad: 150, AlwaysCallsMin: 4, AlwaysCallsMax: 4, AlwaysExhausted: 150, Recall: good, Lateness: late}
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cell EngineCell
		want []string
	}{
		{"capacity: all met", EngineCell{Kind: cellCapacity, Capacity: 1000,
			Product: FleetRun{Drained: true, Goodput: 950, Calls: 1000, Shed: 50, ShedShare: 0.05}},
			[]string{"yes", "yes", "yes", "yes", ""}},
		{"capacity: the breaker opened, too many shed", EngineCell{Kind: cellCapacity, Capacity: 1000,
			Product: FleetRun{Drained: true, Goodput: 950, Calls: 1000, Shed: 200, ShedShare: 0.2, BreakerOpened: 1}},
			[]string{"yes", "no", "yes", "no", ""}},
		{"capacity: not drained", EngineCell{Kind: cellCapacity, Capacity: 1000, Product: FleetRun{Goodput: 950}},
			[]string{"no", "yes", "no", "yes", ""}},
		{"healthy at 0.95", healthyCell(func(*EngineCell) {}), []string{"yes", ""}},
		{"healthy at exactly the target", healthyCell(func(c *EngineCell) { c.Goodput = 900 }), []string{"yes", ""}},
		{"healthy below", healthyCell(func(c *EngineCell) { c.Goodput = 899 }), []string{"no", ""}},
		{"the product left healthy reads unbilled", healthyCell(func(c *EngineCell) { c.GoodputDone = false }), []string{"no", ""}},
		{"the bare client did", healthyCell(func(c *EngineCell) { c.BareDone = false }), []string{"no", ""}},
		{"no baseline", healthyCell(func(c *EngineCell) { c.BareGoodput = 0 }), []string{"no", ""}},
		{"the mix, backlog: all met", mixCell(func(*EngineCell) {}), []string{"yes", "yes", "yes", "yes", "yes", ""}},
		{"the mix: a read called a fifth time", mixCell(func(c *EngineCell) { c.AlwaysCallsMax = 5 }), []string{"yes", "no", "yes", "yes", "yes", ""}},
		{"the mix: a read called 3 times", mixCell(func(c *EngineCell) { c.AlwaysCallsMin = 3 }), []string{"yes", "no", "yes", "yes", "yes", ""}},
		{"the mix: one not dead-lettered exhausted", mixCell(func(c *EngineCell) { c.AlwaysExhausted = 149 }), []string{"yes", "no", "yes", "yes", "yes", ""}},
		{"the mix: no always-503 read", mixCell(func(c *EngineCell) { c.AlwaysBad, c.AlwaysCallsMin, c.AlwaysCallsMax, c.AlwaysExhausted = 0, 0, 0, 0 }),
			[]string{"yes", "no", "yes", "yes", "yes", ""}},
		{"the mix, backlog: issue 39's figures", EngineCell{Kind: cellMix, Product: paused(8), Goodput: 30, GoodputDone: true, BareGoodput: 1000, BareDone: true,
			AlwaysBad: 150, AlwaysCallsMin: 4, AlwaysCallsMax: 9, AlwaysExhausted: 25,
			Recall:   Gaps{Count: 90, Min: time.Second, P50: 5 * time.Second, Max: 13 * time.Second},
			Lateness: Lateness{Count: 100, Percentiles: Percentiles{P99: 13 * time.Second}}},
			[]string{"no", "no", "no", "no", "no", ""}},
		{"the mix, trickle: no goodput, lateness not judged", EngineCell{Kind: cellMix, Trickle: true, Product: drained,
			AlwaysBad: 10, AlwaysCallsMin: 4, AlwaysCallsMax: 4, AlwaysExhausted: 10, Recall: good,
			Lateness: Lateness{Count: 10, Percentiles: Percentiles{P99: time.Second}}},
			[]string{"yes", "yes", "yes", "", ""}},
		{"switch: at 0.92", EngineCell{Kind: cellSwitch, Product: drained, SwitchAfter: 2 * time.Second,
			Goodput: 920, GoodputDone: true, BareGoodput: 1000, BareDone: true},
			[]string{"yes", ""}},
		{"switch: the deadline before the switch", EngineCell{Kind: cellSwitch, Product: drained, BareGoodput: 1000, BareDone: true},
			[]string{"no", ""}},
		{"account: waited its 5s, no pause", EngineCell{Kind: cellAccount, Product: drained, Goodput: 950, GoodputDone: true,
			BareGoodput: 1000, BareDone: true, WaitFloor: 5 * time.Second, Recall: Gaps{Count: 150, Min: 5 * time.Second, Max: 5100 * time.Millisecond}},
			[]string{"yes", "yes", "yes", ""}},
		{"account, trickle: called again too soon, paused", EngineCell{Kind: cellAccount, Trickle: true, Product: paused(1),
			WaitFloor: 5 * time.Second, Recall: Gaps{Count: 10, Min: time.Second, Max: 5100 * time.Millisecond}},
			[]string{"no", "no", ""}},
		{"random: at its bound, inside the band", EngineCell{Kind: cellRandom, Product: drained, LimitBound: 32,
			Exhausted: 80, Expected: 76.8, BandLow: 50.8, BandHigh: 102.8},
			[]string{"yes", "yes", "yes", ""}},
		{"random: the limit down, too few exhausted", EngineCell{Kind: cellRandom, Product: FleetRun{Drained: true, LimitMedian: 3, BreakerOpened: 1},
			LimitBound: 32, Exhausted: 10, Expected: 76.8, BandLow: 50.8, BandHigh: 102.8},
			[]string{"no", "no", "no", ""}},
		{"join: half its fair share", EngineCell{Kind: cellJoin, Product: FleetRun{}, Capacity: 100, ReplicaPerSec: 10},
			[]string{"yes", "yes", ""}},
		{"join: starved, the breaker opened", EngineCell{Kind: cellJoin, Product: FleetRun{BreakerOpened: 1}, Capacity: 100, ReplicaPerSec: 9},
			[]string{"no", "no", ""}},
		{"down: billed 4s after the return", EngineCell{Kind: cellDown, Reads: 3000, Product: drained, DownCalls: 40, AllBilled: true, Recovery: 4 * time.Second},
			[]string{"yes", "yes", "yes", ""}},
		{"down: a read dead-lettered, 6s, a call a read", EngineCell{Kind: cellDown, Reads: 3000, Product: FleetRun{Drained: true, DeadLetters: map[string]int{"exhausted": 1}},
			DownCalls: 3000, AllBilled: true, Recovery: 6 * time.Second},
			[]string{"no", "no", "no", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cell.Engine, tt.cell.Replicas, tt.cell.Traffic = "e", 1, "backlog 1"
			rows := tt.cell.rows(p)
			var got []string
			for _, r := range rows {
				got = append(got, r.Met)
				assert.Equal(t, "engines short: e, 1 replica(s), backlog 1", r.Scenario)
				if r.Met != "" {
					assert.NotEmpty(t, r.Target, "a row judged has a target: %s", r.Measure)
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// The matrix's long tail: one call in ten takes 80ms in all, the others the
// service time; a call draws the same in every run.
func TestTailShape(t *testing.T) {
	d := tailShape.delayFunc(20261130)
	require.NotNil(t, d)
	assert.Equal(t, d(Key(3), 1), d(Key(3), 1))
	slow := 0
	for i := range 20_000 {
		switch got := d(Key(i), 1); got {
		case 75 * time.Millisecond:
			slow++
		case 0:
		default:
			t.Fatalf("read %d: delay %s, want 0 or 75ms", i, got)
		}
	}
	assert.InDelta(t, 0.1, float64(slow)/20_000, 0.01)
	o := tailShape.options(1)
	assert.Equal(t, 5*time.Millisecond, o.ServiceTime)
	assert.Nil(t, uniformShape.delayFunc(1), "the uniform shape has no delay")
}

func TestCellChosen(t *testing.T) {
	for _, tt := range []struct {
		name   string
		chosen []string
		want   bool
	}{
		{"capacity, 16 replicas", nil, true},
		{"capacity, 16 replicas", []string{"capacity, 16"}, true},
		{"capacity, 1 replicas", []string{"capacity, 16"}, false},
		{"down, 4 replicas", []string{"capacity, 16", "down"}, true},
	} {
		assert.Equal(t, tt.want, cellChosen(tt.name, tt.chosen), "%s among %q", tt.name, tt.chosen)
	}
}
