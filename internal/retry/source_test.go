package retry_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
)

func TestNewRandMatchesPCG(t *testing.T) {
	got := retry.NewRand(seed)
	want := rand.New(rand.NewPCG(seed, seed))
	for range 100 {
		require.Equal(t, want.Int64N(1<<40), got.Int64N(1<<40))
	}
}

func TestNewRandConcurrent(t *testing.T) {
	// Goroutines share one Rand; run under -race. Between them they must see
	// exactly the draws one goroutine would see alone: none lost, none repeated.
	const (
		workers = 16
		each    = 500
		n       = 1_000_000_007
	)
	r := retry.NewRand(seed)
	results := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				results[w] = append(results[w], r.Int64N(n))
			}
		})
	}
	wg.Wait()

	got := slices.Concat(results...)
	slices.Sort(got)

	alone := retry.NewRand(seed)
	want := make([]int64, 0, workers*each)
	for range workers * each {
		want = append(want, alone.Int64N(n))
	}
	slices.Sort(want)
	assert.Equal(t, want, got)
}

func TestNewRandConcurrentDelay(t *testing.T) {
	r := retry.NewRand(seed)
	p := policy()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for attempt := range uint64(200) {
				d := p.DelayWithFloor(attempt, r, time.Second)
				assert.GreaterOrEqual(t, d, time.Second)
				assert.LessOrEqual(t, d, p.Cap)
			}
		})
	}
	wg.Wait()
}

// seededSchedule is what NewRand(20261130) gives under policy() for
// attempts 1..6. It is hard-coded so that any change to how delays are drawn
// fails the tests.
var seededSchedule = []time.Duration{
	347711532 * time.Nanosecond,   // attempt 1, band [0, 500ms]
	554888885 * time.Nanosecond,   // attempt 2, band [0, 1s]
	50267459 * time.Nanosecond,    // attempt 3, band [0, 2s]
	954707421 * time.Nanosecond,   // attempt 4, band [0, 4s]
	2013701458 * time.Nanosecond,  // attempt 5, band [0, 8s]
	14796792478 * time.Nanosecond, // attempt 6, band [0, 16s]
}

const seed = 20261130

// countingSource counts the draws taken from the wrapped source.
type countingSource struct {
	src   retry.Source
	draws int
}

func (c *countingSource) Int64N(n int64) int64 {
	c.draws++
	return c.src.Int64N(n)
}

// topSource always returns the largest value allowed, n-1.
type topSource struct{}

func (topSource) Int64N(n int64) int64 { return n - 1 }
