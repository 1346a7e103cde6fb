package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type parkedMsg struct {
	jetstream.Msg
	id int
}

// Every parked read is taken exactly once, however many workers race for
// them.
func TestTakeParkedGivesEachReadOnce(t *testing.T) {
	t.Parallel()
	d := newDelayer(time.Minute, time.Now, nil, func(int) {})
	const n = 1000
	for i := range n {
		d.park(&parkedMsg{id: i})
	}
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 8 {
				m, ok := d.takeParked()
				if !ok {
					t.Error("a token found no parked read")
					return
				}
				mu.Lock()
				seen[m.(*parkedMsg).id]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, n)
	for id, c := range seen {
		assert.Equal(t, 1, c, "read %d", id)
	}
	assert.Zero(t, d.size())
}

// A read held for a retry, or parked for the breaker, may have waited in
// the client buffer for most of the ack wait: its first keep-alive goes out
// at once, not a full interval later.
func TestHeldAndParkedReadsAreKeptAliveAtOnce(t *testing.T) {
	t.Parallel()
	d := newDelayer(time.Hour, time.Now, nil, func(int) {})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.run(ctx) }()
	defer func() { cancel(); <-done }()

	held, parked := newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1)
	d.hold(held, time.Hour, true)
	d.park(parked)
	require.Eventually(t, func() bool {
		return held.count("in_progress") == 1 && parked.count("in_progress") == 1
	}, 5*time.Second, time.Millisecond)
	assert.Empty(t, held.settled())
	assert.Empty(t, parked.settled())
}

// At a stop, a read held for a retry goes back with the rest of its delay;
// a parked read is handed back.
func TestReleaseGivesEveryReadBack(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	d := newDelayer(time.Hour, func() time.Time { return now }, nil, func(int) {})
	held, parked := newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1)
	d.hold(held, 3*time.Second, true)
	d.park(parked)
	var handedBack []jetstream.Msg
	n := d.release(func(m jetstream.Msg, err error) {
		assert.ErrorIs(t, err, errStopping)
		handedBack = append(handedBack, m)
	})
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"nak 3s"}, held.settled())
	assert.Equal(t, []jetstream.Msg{parked}, handedBack)
	assert.Zero(t, d.size())
}
