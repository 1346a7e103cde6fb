package stream

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/clock"
)

// statusConn is a Conn whose status a test sets; leases.changed is fed by
// hand, so its channel is never used.
type statusConn struct{ s nats.Status }

func (c *statusConn) Status() nats.Status                           { return c.s }
func (c *statusConn) StatusChanged(...nats.Status) chan nats.Status { return make(chan nats.Status) }
func (c *statusConn) RemoveStatusListener(chan nats.Status)         {}

func TestALeaseIsLostToAnOutageOfAQuarterOfTheAckWait(t *testing.T) {
	const ackWait = 4 * time.Second // lapse: 1s
	tests := []struct {
		name        string
		arrive      time.Duration // when the delivery arrived
		down, up    time.Duration // the outage (up 0: still down at 10s)
		wantHeld    bool
		wantLongest time.Duration
	}{
		{"no outage", 0, 0, 0, true, 0},
		{"a short outage", 2 * time.Second, 3 * time.Second, 3900 * time.Millisecond, true, 0},
		{"an outage of the lapse", 2 * time.Second, 3 * time.Second, 4 * time.Second, false, time.Second},
		{"a long outage before it arrived", 8 * time.Second, 2 * time.Second, 7 * time.Second, true, 0},
		{"handed over during a long outage", 6500 * time.Millisecond, 2 * time.Second, 7 * time.Second, false, 5 * time.Second},
		{"a long outage after it arrived", time.Second, 2 * time.Second, 7 * time.Second, false, 5 * time.Second},
		{"down now, briefly", 2 * time.Second, 9900 * time.Millisecond, 0, false, 100 * time.Millisecond},
		{"down now, since before it arrived", 2 * time.Second, time.Second, 0, false, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
			l := newLeases(clk, ackWait, &statusConn{}, slog.New(slog.DiscardHandler), func() {})
			at := func(d time.Duration) { clk.Advance(d - clk.Mono()) }
			if tt.down > 0 {
				at(tt.down)
				l.changed(nats.RECONNECTING)
				if tt.up > 0 {
					at(tt.up)
					l.changed(nats.CONNECTED)
				}
			}
			at(10 * time.Second)
			held, longest := l.held(tt.arrive)
			assert.Equal(t, tt.wantHeld, held)
			assert.Equal(t, tt.wantLongest, longest)
		})
	}
}

// TestAStallOfTheProcessLosesTheLease: the process stopped for the lapse
// (its ticks a second apart, the lapse 1s) while the connection stayed up:
// nothing kept its deliveries alive, so a delivery it held is lost; one
// handed over after the stall is held.
func TestAStallOfTheProcessLosesTheLease(t *testing.T) {
	tests := []struct {
		name     string
		gap      time.Duration
		arrive   time.Duration // the ticks are at 1s and 1s+gap
		wantHeld bool
	}{
		{"ticking", 250 * time.Millisecond, 0, true},
		{"a stall shorter than the lapse", 900 * time.Millisecond, 0, true},
		{"a stall of the lapse", time.Second, 0, false},
		{"a delivery handed over after the stall", time.Second, 2 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
			clk.Advance(time.Second)
			l := newLeases(clk, 4*time.Second, &statusConn{s: nats.CONNECTED}, slog.New(slog.DiscardHandler), func() {})
			l.changed(nats.CONNECTED)
			l.tick()
			clk.Advance(tt.gap)
			l.tick()
			clk.Advance(time.Second)
			held, _ := l.held(tt.arrive)
			assert.Equal(t, tt.wantHeld, held)
		})
	}
}
