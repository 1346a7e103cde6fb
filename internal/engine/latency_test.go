package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/engine"
)

// dipped feeds n served calls sent during a dip, as serve does.
func dipped(v *engine.View, c *clock, n, inFlight int, lat func(i int) time.Duration) {
	for i := range n {
		d := lat(i)
		c.advance(d / time.Duration(inFlight))
		v.Observe(engine.Call{Read: uint64(i), Answer: engine.Served, Latency: d, Low: true})
	}
}

// A fleet that fills the engine's queue from its first calls on never
// shows a queue in its rounds: their medians are the baseline. Its dips
// do: the engine answers faster while the fleet sends less, and the
// latency it answers with then is the baseline the rounds are held to.
func TestAQueueFromTheStartShowsInTheDips(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	queuedLat := uniform(r, 16*time.Millisecond, 18*time.Millisecond)
	for _, tc := range []struct {
		name string
		dips bool
	}{{"without dips", false}, {"with dips", true}} {
		t.Run(tc.name, func(t *testing.T) {
			v, c := newView(t, engine.Options{})
			q, _ := serve(v, c, 3000, 24, queuedLat)
			assert.Zero(t, q, "no queue seen in the rounds alone")
			if tc.dips {
				dipped(v, c, 32, 12, uniform(r, 5*time.Millisecond, 7*time.Millisecond))
			}
			q, _ = serve(v, c, 3000, 24, queuedLat)
			assert.Equal(t, tc.dips, q > 0, "queued")
			assert.Equal(t, tc.dips, v.Snapshot().Queued)
		})
	}
}

// A latency that merely spreads, the same whatever the fleet sends, is the
// same in the dips: however many dips measure the baseline, no queue.
func TestASpreadLatencyIsTheSameInTheDips(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	lat := uniform(r, 5*time.Millisecond, 25*time.Millisecond)
	v, c := newView(t, engine.Options{})
	queued, held := 0, 0
	for range 100 {
		dipped(v, c, 32, 16, lat)
		q, h := serve(v, c, 500, 32, lat)
		queued, held = queued+q, held+h
	}
	assert.Zero(t, queued)
	assert.Zero(t, held)
}
