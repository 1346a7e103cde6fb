package stream

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
)

// manualClock is a clock a test moves by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time          { return c.t }
func (c *manualClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// A held retry is NAKed (plainly: redelivered at once) when its delay is
// over, not before.
func TestHeldRetryIsNakedWhenItsDelayIsOver(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now)
	r := &retries{keep: keep, gate: func() (bool, time.Duration) { return true, 0 }}
	msg := newFakeMsg(goodRead, 1)
	r.hold(owned(msg), 3*time.Second, true, false)
	keep.wait()
	assert.Equal(t, 1, msg.count("in_progress"), "kept alive at once")
	assert.NotContains(t, msg.settled(), "nak")

	clk.advance(2 * time.Second)
	keep.wait()
	assert.NotContains(t, msg.settled(), "nak")

	clk.advance(time.Second)
	keep.wait()
	assert.Contains(t, msg.settled(), "nak")
	assert.Zero(t, keep.size())
}

// A retry the gate does not let go (over the retry budget) is held again,
// not NAKed and not charged, until the gate lets it.
func TestGateDeniedRetryIsHeldAgain(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now)
	open := false
	asked := 0
	r := &retries{keep: keep, gate: func() (bool, time.Duration) { asked++; return open, 5 * time.Second }}
	msg := newFakeMsg(goodRead, 1)
	r.hold(owned(msg), time.Second, true, false)

	clk.advance(time.Second)
	keep.wait()
	require.Equal(t, 1, asked)
	assert.NotContains(t, msg.settled(), "nak")
	assert.Equal(t, 1, keep.size(), "held again")

	clk.advance(4 * time.Second)
	keep.wait()
	assert.Equal(t, 1, asked, "held again for the time the gate gave")

	open = true
	clk.advance(time.Second)
	keep.wait()
	assert.Equal(t, 2, asked)
	assert.Contains(t, msg.settled(), "nak")
}

// A dead-letter copy retried (not gated) never asks the gate, and a zero
// delay without the gate is a NAK at once.
func TestUngatedRetryNeverAsksTheGate(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now)
	r := &retries{keep: keep, gate: func() (bool, time.Duration) {
		t.Error("the gate was asked")
		return false, time.Second
	}}
	now, later := newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1)
	r.hold(owned(now), 0, false, false)
	assert.Equal(t, []string{"nak"}, now.settled())
	r.hold(owned(later), time.Second, false, false)
	clk.advance(time.Second)
	keep.wait()
	assert.Contains(t, later.settled(), "nak")
}

// At a stop, a held read goes back with the rest of its delay; one already
// due goes back at once.
func TestReleaseGivesHeldReadsBackWithTheRestOfTheirDelay(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now)
	p := newPark(keep)
	r := &retries{keep: keep, gate: func() (bool, time.Duration) { return false, time.Hour }}
	held, due, parked := newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1), newFakeMsg(goodRead, 1)
	r.hold(owned(held), 5*time.Second, true, false)
	r.hold(owned(due), time.Second, true, false)
	p.add(owned(parked))
	clk.advance(2 * time.Second)

	assert.Equal(t, 2, r.release())
	assert.Equal(t, []string{"nak 3s"}, held.settled())
	assert.Equal(t, []string{"nak"}, due.settled())
	assert.Empty(t, parked.settled(), "a parked read is the park's to give back")
	assert.Equal(t, 1, keep.size())
}

// The engine back, each held retry whose delay grew with its outage is due
// within the spread, drawn for it from the seeded source; a read's own
// retry, one due sooner already and a parked read keep their times.
func TestBackHastensTheRetriesTheOutageDelayed(t *testing.T) {
	t.Parallel()
	clk := &manualClock{t: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)}
	keep := testKeepAlive(clk.now)
	p := newPark(keep)
	r := &retries{keep: keep, gate: func() (bool, time.Duration) { return true, 0 }}
	outage, soon, own, parked := newFakeMsg(goodRead, 3), newFakeMsg(goodRead, 3), newFakeMsg(goodRead, 3), newFakeMsg(goodRead, 1)
	r.hold(owned(outage), 12*time.Second, true, true)
	r.hold(owned(soon), 100*time.Millisecond, true, true)
	r.hold(owned(own), 12*time.Second, true, false)
	p.add(owned(parked))

	// The draw is the seeded source's first: 480ms of the 500ms spread.
	draw := time.Duration(retry.NewRand(7).Int64N(int64(500*time.Millisecond) + 1))
	require.Equal(t, 480*time.Millisecond, draw.Round(time.Millisecond))
	assert.Equal(t, 1, r.back(500*time.Millisecond, retry.NewRand(7)), "only the outage's retry due later than the spread")

	clk.advance(100 * time.Millisecond)
	keep.wait()
	assert.Equal(t, []string{"nak"}, soon.settled(), "due sooner already: at its own time")
	assert.NotContains(t, outage.settled(), "nak")

	clk.advance(draw - 100*time.Millisecond)
	keep.wait()
	assert.Equal(t, []string{"nak"}, outage.settled(), "due at the draw from the return")
	assert.NotContains(t, own.settled(), "nak", "a read's own delay is its own")
	assert.Empty(t, parked.settled())

	clk.advance(12 * time.Second)
	keep.wait()
	assert.Equal(t, []string{"nak"}, own.settled())
}
