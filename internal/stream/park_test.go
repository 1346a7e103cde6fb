package stream

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testKeepAlive is a keep-alive owner with one watch and a long ack wait,
// on the given clock.
func testKeepAlive(now func() time.Time) *keepAlive {
	o := Options{AckWait: 2 * time.Hour, Concurrency: 1, PullBatch: 1, HandlerTimeout: time.Second}
	return newKeepAlive(o, now, nil, func(int) {})
}

// Every parked read is taken exactly once, however many workers race for
// them.
func TestTakeParkedGivesEachReadOnce(t *testing.T) {
	t.Parallel()
	keep := testKeepAlive(time.Now)
	p := newPark(keep)
	const n = 1000
	for range n {
		p.add(owned(newFakeMsg(goodRead, 1)))
	}
	require.Equal(t, n, p.len())
	var mu sync.Mutex
	seen := map[*delivery]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 8 {
				m, ok := p.take()
				if !ok {
					t.Error("a token found no parked read")
					return
				}
				mu.Lock()
				seen[m]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, n)
	for _, c := range seen {
		assert.Equal(t, 1, c)
	}
	assert.Zero(t, p.len())
	assert.Zero(t, keep.size(), "a taken read is no longer kept alive")
	_, ok := p.take()
	assert.False(t, ok)
}

// The park gives reads back oldest first, and a read removed from it (its
// worker took it by another way) is neither taken nor kept alive.
func TestParkIsOldestFirstAndRemovable(t *testing.T) {
	t.Parallel()
	keep := testKeepAlive(time.Now)
	p := newPark(keep)
	a, b, c := owned(newFakeMsg(goodRead, 1)), owned(newFakeMsg(goodRead, 1)), owned(newFakeMsg(goodRead, 1))
	p.add(a)
	p.add(b)
	p.add(c)
	assert.True(t, p.remove(b))
	assert.False(t, p.remove(b), "a read is removed once")
	assert.Equal(t, 2, keep.size())
	first, _ := p.take()
	second, _ := p.take()
	assert.Equal(t, []*delivery{a, c}, []*delivery{first, second})
}

// At a stop, every parked read is handed back, never charged: the error
// says it waited in the process.
func TestParkReleaseHandsEveryReadBack(t *testing.T) {
	t.Parallel()
	keep := testKeepAlive(time.Now)
	p := newPark(keep)
	const n = 40
	for range n {
		p.add(owned(newFakeMsg(goodRead, 1)))
	}
	var mu sync.Mutex
	handedBack := map[*delivery]bool{}
	got := p.release(func(m *delivery, err error) {
		assert.ErrorIs(t, err, errStopping)
		mu.Lock()
		handedBack[m] = true
		mu.Unlock()
	})
	assert.Equal(t, n, got)
	assert.Len(t, handedBack, n)
	assert.Zero(t, p.len())
	assert.Zero(t, keep.size())
}

// A read parked after the park was released (a drain that outlived the
// stop and its grace) is handed back at once, not left parked where
// nothing keeps it alive or takes it.
func TestAReadParkedAfterReleaseIsHandedBack(t *testing.T) {
	t.Parallel()
	keep := testKeepAlive(time.Now)
	p := newPark(keep)
	p.add(owned(newFakeMsg(goodRead, 1)))
	var handed []*delivery
	hb := func(m *delivery, why error) {
		assert.ErrorIs(t, why, errStopping)
		handed = append(handed, m)
	}
	require.Equal(t, 1, p.release(hb))
	late := owned(newFakeMsg(goodRead, 1))
	p.add(late)
	require.Len(t, handed, 2)
	assert.Same(t, late, handed[1])
	assert.Zero(t, p.len())
	assert.Zero(t, keep.size())
}
