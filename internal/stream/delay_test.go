package stream

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

type parkedMsg struct {
	jetstream.Msg
	id int
}

// Every parked read is taken exactly once, however many workers race for
// them.
func TestTakeParkedGivesEachReadOnce(t *testing.T) {
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
