package retry_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
)

// policy is the policy these tests were written for (the binary's, whose
// values are package config's): 500ms base, 30s cap, 6 attempts, a 5m
// ceiling on a downstream-asked wait.
func policy() retry.Policy {
	return retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(p *retry.Policy)
		want []string // one line per violation; empty means valid
	}{
		{name: "default", give: func(*retry.Policy) {}},
		{name: "cap equal to base", give: func(p *retry.Policy) { p.Cap = p.Base }},
		{name: "one attempt", give: func(p *retry.Policy) { p.MaxAttempts = 1 }},
		{name: "zero max server wait", give: func(p *retry.Policy) { p.MaxServerWait = 0 }},
		{
			name: "zero base",
			give: func(p *retry.Policy) { p.Base = 0 },
			want: []string{"retry base (0s) must be > 0"},
		},
		{
			name: "negative base",
			give: func(p *retry.Policy) { p.Base = -time.Second },
			want: []string{"retry base (-1s) must be > 0"},
		},
		{
			name: "cap below base",
			give: func(p *retry.Policy) { p.Cap = 100 * time.Millisecond },
			want: []string{"retry cap (100ms) must be >= retry base (500ms)"},
		},
		{
			name: "zero max attempts",
			give: func(p *retry.Policy) { p.MaxAttempts = 0 },
			want: []string{"retry max attempts (0) must be >= 1"},
		},
		{
			name: "negative max attempts",
			give: func(p *retry.Policy) { p.MaxAttempts = -3 },
			want: []string{"retry max attempts (-3) must be >= 1"},
		},
		{
			name: "negative max server wait",
			give: func(p *retry.Policy) { p.MaxServerWait = -time.Second },
			want: []string{"retry max server wait (-1s) must be >= 0"},
		},
		{
			name: "every field wrong",
			give: func(p *retry.Policy) { *p = retry.Policy{Cap: -1, MaxServerWait: -1} },
			want: []string{
				"retry base (0s) must be > 0",
				"retry cap (-1ns) must be >= retry base (0s)",
				"retry max attempts (0) must be >= 1",
				"retry max server wait (-1ns) must be >= 0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy()
			tt.give(&p)
			err := p.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.EqualError(t, err, strings.Join(tt.want, "\n"))
			assert.ErrorIs(t, err, retry.ErrInvalidPolicy)
		})
	}
}

func TestCeiling(t *testing.T) {
	p := policy()
	tests := []struct {
		give uint64
		want time.Duration
	}{
		{give: 0, want: 500 * time.Millisecond},
		{give: 1, want: 500 * time.Millisecond},
		{give: 2, want: time.Second},
		{give: 3, want: 2 * time.Second},
		{give: 4, want: 4 * time.Second},
		{give: 5, want: 8 * time.Second},
		{give: 6, want: 16 * time.Second},
		{give: 7, want: 30 * time.Second},
		{give: 8, want: 30 * time.Second},
		{give: 63, want: 30 * time.Second},
		{give: 64, want: 30 * time.Second},
		{give: 65, want: 30 * time.Second},
		{give: 1_000_000, want: 30 * time.Second},
		{give: math.MaxUint64, want: 30 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, p.Ceiling(tt.give), "attempt %d", tt.give)
	}
}

func TestCeilingWidestPolicy(t *testing.T) {
	p := retry.Policy{Base: 1, Cap: math.MaxInt64, MaxAttempts: 1}
	tests := []struct {
		give uint64
		want time.Duration
	}{
		{give: 1, want: 1},
		{give: 62, want: 1 << 61},
		{give: 63, want: 1 << 62},
		{give: 64, want: math.MaxInt64},
		{give: 65, want: math.MaxInt64},
		{give: math.MaxUint64, want: math.MaxInt64},
	}
	for _, tt := range tests {
		got := p.Ceiling(tt.give)
		assert.Equal(t, tt.want, got, "attempt %d", tt.give)
		assert.Positive(t, got, "attempt %d", tt.give)
	}
}

func TestCeilingNeverOverflows(t *testing.T) {
	// Every attempt and a spread of bases: the ceiling never falls as the
	// attempt grows and never leaves [Base, Cap].
	bases := []time.Duration{1, 3, time.Millisecond, 500 * time.Millisecond, math.MaxInt64 / 3, math.MaxInt64}
	for _, base := range bases {
		p := retry.Policy{Base: base, Cap: math.MaxInt64, MaxAttempts: 1}
		prev := time.Duration(0)
		for attempt := uint64(0); attempt <= 130; attempt++ {
			got := p.Ceiling(attempt)
			require.GreaterOrEqual(t, got, base, "base %d attempt %d", base, attempt)
			require.GreaterOrEqual(t, got, prev, "base %d attempt %d", base, attempt)
			prev = got
		}
		assert.Equal(t, time.Duration(math.MaxInt64), p.Ceiling(math.MaxUint64))
	}
}

func TestCeilingInvalidPolicy(t *testing.T) {
	tests := []struct {
		name string
		give retry.Policy
		want time.Duration
	}{
		{name: "zero", give: retry.Policy{}, want: 0},
		{name: "negative base", give: retry.Policy{Base: -1, Cap: time.Second}, want: 0},
		{name: "negative cap", give: retry.Policy{Base: time.Second, Cap: -1}, want: 0},
		{name: "cap below base", give: retry.Policy{Base: time.Second, Cap: time.Millisecond}, want: time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, attempt := range []uint64{0, 1, 2, 64, math.MaxUint64} {
				assert.Equal(t, tt.want, tt.give.Ceiling(attempt), "attempt %d", attempt)
			}
		})
	}
}

func TestDelaySeededSchedule(t *testing.T) {
	tests := []struct {
		name string
		give retry.Source
		want []time.Duration
	}{
		{name: "NewRand", give: retry.NewRand(seed), want: seededSchedule},
		{
			name: "PCG(1,2)",
			give: rand.New(rand.NewPCG(1, 2)),
			want: []time.Duration{
				384686635 * time.Nanosecond,
				616436224 * time.Nanosecond,
				1568856004 * time.Nanosecond,
				3186386314 * time.Nanosecond,
				1874210165 * time.Nanosecond,
				659284113 * time.Nanosecond,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, schedule(policy(), tt.give, 6))
		})
	}
}

func TestDelayReproducible(t *testing.T) {
	p := policy()
	first := schedule(p, retry.NewRand(seed), 20)
	again := schedule(p, retry.NewRand(seed), 20)
	other := schedule(p, retry.NewRand(seed+1), 20)
	assert.Equal(t, first, again)
	assert.NotEqual(t, first, other)
}

func TestDelayWithinBand(t *testing.T) {
	policies := []retry.Policy{
		policy(),
		{Base: 1, Cap: 7, MaxAttempts: 1, MaxServerWait: 5},
		{Base: 1, Cap: math.MaxInt64, MaxAttempts: 1, MaxServerWait: math.MaxInt64},
	}
	attempts := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 20, 62, 63, 64, 65, 1_000_000, math.MaxUint64}
	for _, p := range policies {
		for s := uint64(0); s < 20; s++ {
			r := retry.NewRand(s)
			floors := rand.New(rand.NewPCG(s, 99))
			for _, attempt := range attempts {
				for range 50 {
					ceiling := p.Ceiling(attempt)
					d := p.Delay(attempt, r)
					require.GreaterOrEqual(t, d, time.Duration(0))
					require.LessOrEqual(t, d, ceiling)

					// Magnitudes from zero to MaxInt64, a quarter of them negative.
					floor := time.Duration(floors.Int64() >> floors.UintN(64))
					if floors.IntN(4) == 0 {
						floor = -floor
					}
					d = p.DelayWithFloor(attempt, r, floor)
					want := time.Duration(0)
					if floor > 0 {
						want = min(floor, p.MaxServerWait)
					}
					require.GreaterOrEqual(t, d, want)
					require.LessOrEqual(t, d, max(ceiling, want))
				}
			}
		}
	}
}

func TestDelayClosedBand(t *testing.T) {
	// With a band of five nanoseconds, both ends must come up.
	p := retry.Policy{Base: 1, Cap: 4, MaxAttempts: 1}
	r := retry.NewRand(seed)
	seen := map[time.Duration]int{}
	for range 1000 {
		seen[p.Delay(3, r)]++
	}
	for d := time.Duration(0); d <= 4; d++ {
		assert.Positive(t, seen[d], "delay %d never drawn", d)
	}
	assert.Len(t, seen, 5)

	assert.Equal(t, 4*time.Nanosecond, p.Delay(3, topSource{}), "top of the band is reachable")
}

func TestDelayLargestCeiling(t *testing.T) {
	p := retry.Policy{Base: 1, Cap: math.MaxInt64, MaxAttempts: 1}
	assert.Equal(t, time.Duration(math.MaxInt64-1), p.Delay(64, topSource{}))
	assert.Equal(t, time.Duration(1<<62), p.Delay(63, topSource{}))
	r := retry.NewRand(seed)
	for range 1000 {
		require.GreaterOrEqual(t, p.Delay(math.MaxUint64, r), time.Duration(0))
	}
}

func TestDelaySpread(t *testing.T) {
	const draws = 10_000
	p := policy()
	r := retry.NewRand(seed)
	var buckets [10]int
	lo, hi := p.Base, time.Duration(0)
	for range draws {
		d := p.Delay(1, r)
		buckets[int64(d)*10/int64(p.Base+1)]++
		lo, hi = min(lo, d), max(hi, d)
	}
	for i, n := range buckets {
		assert.GreaterOrEqual(t, n, draws*8/100, "bucket %d", i)
		assert.LessOrEqual(t, n, draws*12/100, "bucket %d", i)
	}
	assert.Less(t, lo, p.Base/100)
	assert.Greater(t, hi, p.Base*99/100)
}

func TestDelayWithFloor(t *testing.T) {
	// Attempt 1 under NewRand(seed) draws 347.711532ms from [0, 500ms].
	jitter := seededSchedule[0]
	tests := []struct {
		name string
		give time.Duration
		want time.Duration
	}{
		{name: "no floor", give: 0, want: jitter},
		{name: "negative floor ignored", give: -time.Hour, want: jitter},
		{name: "floor below jitter", give: 100 * time.Millisecond, want: jitter},
		{name: "floor above jitter wins", give: 10 * time.Second, want: 10 * time.Second},
		{name: "floor above the band wins", give: time.Minute, want: time.Minute},
		{name: "floor at max server wait", give: 5 * time.Minute, want: 5 * time.Minute},
		{name: "floor clamped to max server wait", give: time.Hour, want: 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &countingSource{src: retry.NewRand(seed)}
			got := policy().DelayWithFloor(1, src, tt.give)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, 1, src.draws, "exactly one draw")
		})
	}
}

func TestDelayWithFloorKeepsSchedule(t *testing.T) {
	// A floor on one attempt leaves every later draw where it was.
	p := policy()
	r := retry.NewRand(seed)
	got := make([]time.Duration, 0, 6)
	for attempt := uint64(1); attempt <= 6; attempt++ {
		floor := time.Duration(0)
		if attempt == 2 {
			floor = time.Hour
		}
		got = append(got, p.DelayWithFloor(attempt, r, floor))
	}
	want := append([]time.Duration(nil), seededSchedule...)
	want[1] = p.MaxServerWait
	assert.Equal(t, want, got)
}

func TestDelayWithFloorZeroMaxServerWait(t *testing.T) {
	p := policy()
	p.MaxServerWait = 0
	assert.Equal(t, seededSchedule[0], p.DelayWithFloor(1, retry.NewRand(seed), time.Hour))
}

func TestExhausted(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		give        uint64
		want        bool
	}{
		{name: "first of six", maxAttempts: 6, give: 1, want: false},
		{name: "fifth of six", maxAttempts: 6, give: 5, want: false},
		{name: "sixth of six", maxAttempts: 6, give: 6, want: true},
		{name: "past the last", maxAttempts: 6, give: 7, want: true},
		{name: "largest attempt", maxAttempts: 6, give: math.MaxUint64, want: true},
		{name: "only attempt", maxAttempts: 1, give: 1, want: true},
		{name: "attempt zero", maxAttempts: 1, give: 0, want: false},
		{name: "zero max attempts", maxAttempts: 0, give: 0, want: true},
		{name: "negative max attempts", maxAttempts: -1, give: 1, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy()
			p.MaxAttempts = tt.maxAttempts
			assert.Equal(t, tt.want, p.Exhausted(tt.give))
		})
	}
}

func TestDelayDoesNotAllocate(t *testing.T) {
	p := policy()
	r := retry.NewRand(seed)
	allocs := testing.AllocsPerRun(1000, func() {
		_ = p.DelayWithFloor(3, r, time.Second)
	})
	assert.Zero(t, allocs)
}

func BenchmarkDelay(b *testing.B) {
	p := policy()
	b.Run("NewRand", func(b *testing.B) {
		r := retry.NewRand(seed)
		b.ReportAllocs()
		for b.Loop() {
			p.Delay(4, r)
		}
	})
	b.Run("PCG", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			p.Delay(4, r)
		}
	})
	b.Run("NewRandParallel", func(b *testing.B) {
		r := retry.NewRand(seed)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p.Delay(4, r)
			}
		})
	})
}

func BenchmarkCeiling(b *testing.B) {
	p := policy()
	b.ReportAllocs()
	for b.Loop() {
		p.Ceiling(math.MaxUint64)
	}
}

// schedule draws the delays for attempts 1..n.
func schedule(p retry.Policy, r retry.Source, n uint64) []time.Duration {
	out := make([]time.Duration, 0, n)
	for attempt := uint64(1); attempt <= n; attempt++ {
		out = append(out, p.Delay(attempt, r))
	}
	return out
}
