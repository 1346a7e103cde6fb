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
