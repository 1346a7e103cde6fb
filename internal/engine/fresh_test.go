package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The calls counted are handed in the order they were sent, not the order
// they were answered: a failure answered at once comes back before the
// success sent just before it, and a trial judged after each call would
// otherwise see a batch's failures before its successes.
func TestPendingHandsCallsInTheOrderSent(t *testing.T) {
	ms := time.Millisecond
	var p pending
	// Answered in this order: the failure sent at 12ms at once, the
	// success sent at 10ms 8ms later, and so on.
	for _, f := range []first{
		{sent: 12 * ms, shed: true}, {sent: 10 * ms}, {sent: 15 * ms, shed: true}, {sent: 11 * ms}, {sent: 40 * ms},
	} {
		p.add(f)
	}
	var got []time.Duration
	p.take(30*ms, 0, func(f first) { got = append(got, f.sent) })
	assert.Equal(t, []time.Duration{10 * ms, 11 * ms, 12 * ms, 15 * ms}, got)
	assert.Len(t, p.calls, 1, "the call sent after the horizon waits")
	assert.Equal(t, 40*ms, p.earliest)
}
