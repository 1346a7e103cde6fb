package stream

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A read held for a retry, or parked for the breaker, may have waited in
// the client buffer for most of the ack wait: its first keep-alive goes out
// at once, not a full interval later.
func TestHeldAndParkedReadsAreKeptAliveAtOnce(t *testing.T) {
	t.Parallel()
	keep := testKeepAlive(time.Now)
	r := &retries{keep: keep, gate: func() (bool, time.Duration) { return true, 0 }}
	p := newPark(keep)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); keep.run(ctx) }()
	defer func() { cancel(); <-done }()

	held, parked := newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1)
	r.hold(owned(held), time.Hour, true, false)
	p.add(owned(parked))
	require.Eventually(t, func() bool {
		return held.count("in_progress") == 1 && parked.count("in_progress") == 1
	}, 5*time.Second, time.Millisecond)
	assert.Empty(t, held.settled())
	assert.Empty(t, parked.settled())
}

// A waiting read is kept alive every AckWait/2, and only then.
func TestWaitingReadIsKeptAliveEveryHalfAckWait(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now) // AckWait 2h
	p := newPark(keep)
	msg := newFakeMsg(goodRead, 1)
	p.add(owned(msg))
	assert.Equal(t, time.Hour, keep.wait(), "the next one is AckWait/2 away")
	assert.Equal(t, 1, msg.count("in_progress"), "the first at once")

	clk.advance(59 * time.Minute)
	keep.wait()
	assert.Equal(t, 1, msg.count("in_progress"))
	clk.advance(time.Minute)
	keep.wait()
	assert.Equal(t, 2, msg.count("in_progress"))
}

// A worker's read in flight is kept alive by the scan once its first
// signal is due, and not after the worker disarms its watch.
func TestWatchedReadIsKeptAliveUntilDisarmed(t *testing.T) {
	t.Parallel()
	wall := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	keep := testKeepAlive(func() time.Time { return wall })
	w := keep.watches[0]
	msg := newFakeMsg(goodRead, 1)
	keep.arm(w, owned(msg), wall)

	keep.scan()
	assert.Zero(t, msg.count("in_progress"), "not before its first signal is due")
	wall = wall.Add(keep.first)
	keep.scan()
	assert.Equal(t, 1, msg.count("in_progress"))
	wall = wall.Add(keep.every)
	keep.scan()
	assert.Equal(t, 2, msg.count("in_progress"))

	keep.disarm(w)
	wall = wall.Add(keep.every)
	keep.scan()
	assert.Equal(t, 2, msg.count("in_progress"))
}

// The first keep-alive of a read in flight covers the time it may have
// waited in the client buffer: with a pull of 10 for 2 workers and a 1s
// handler timeout, up to 5s of a 30s ack wait.
func TestFirstKeepAliveCoversTheClientBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		o     Options
		first time.Duration
	}{
		{"buffer short", Options{AckWait: 30 * time.Second, Concurrency: 2, PullBatch: 10, HandlerTimeout: time.Second}, 15 * time.Second},
		{"buffer long", Options{AckWait: 30 * time.Second, Concurrency: 2, PullBatch: 40, HandlerTimeout: time.Second}, 7 * time.Second},
		{"buffer longer than the ack wait", Options{AckWait: 30 * time.Second, Concurrency: 1, PullBatch: 100, HandlerTimeout: time.Second}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeepAlive(tc.o, time.Now, nil, func(int) {})
			assert.Equal(t, tc.first, k.first)
			assert.Equal(t, 15*time.Second, k.every)
		})
	}
}
