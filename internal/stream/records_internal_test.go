package stream

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// A read's attempt is the calls charged to it, plus one: never its
// deliveries, except past the bounds that keep a read from going round
// without end.
func TestAttemptOf(t *testing.T) {
	t.Parallel()
	counts := func(calls, sheds uint64) Record { return Record{Calls: calls, Sheds: sheds, CountsCalls: true} }
	tests := []struct {
		name      string
		delivered uint64
		rec       Record
		unkept    bool // records not kept, or the look-up failed
		want      uint64
	}{
		{name: "first delivery", delivered: 1, want: 1},
		{name: "first delivery, records not kept", delivered: 1, unkept: true, want: 1},
		{name: "no record: every earlier delivery reached no call", delivered: 5, want: 1},
		{name: "records not kept: every delivery counts", delivered: 5, unkept: true, want: 5},
		{name: "calls on record", delivered: 3, rec: counts(2, 0), want: 3},
		{name: "calls and deliveries without a call", delivered: 6, rec: counts(2, 0), want: 3},
		{name: "sheds are not attempts", delivered: 6, rec: counts(2, 3), want: 3},
		{name: "deliveries without a call, up to the bound", delivered: 1 + MaxUncalled, want: 1},
		{name: "past the bound, each counts", delivered: 3 + MaxUncalled, want: 3},
		{name: "sheds past their bound count", delivered: 1 + MaxSheds + 2, rec: counts(0, MaxSheds+2), want: 3},
		{name: "a record claiming more calls than deliveries", delivered: 3, rec: counts(9, 0), want: 3},
		{name: "earlier version: hand-backs off the delivery count", delivered: 5, rec: Record{HandBacks: 2}, want: 3},
		{name: "earlier version: hand-backs and sheds", delivered: 5, rec: Record{HandBacks: 1, Sheds: 1}, want: 3},
		{name: "earlier version: a decision on record", delivered: 4, rec: Record{DeadLetter: &Decision{}}, want: 4},
		{name: "earlier version: credits bounded", delivered: 150, rec: Record{HandBacks: 200}, want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := &jetstream.MsgMetadata{NumDelivered: tt.delivered}
			assert.Equal(t, tt.want, attemptOf(md, tt.rec, !tt.unkept))
			if !tt.unkept {
				// Rewritten to count calls, the record gives the same attempt.
				assert.Equal(t, tt.want, attemptOf(md, counted(md, tt.rec), true), "counted")
			}
		})
	}
}
