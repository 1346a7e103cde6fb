package topology_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/topology"
)

// The messages name the caller's switches where they say the fix, and
// without them say it in this package's terms, naming no switch at all.
func TestTheMessagesNameTheCallersSwitches(t *testing.T) {
	t.Parallel()
	sw := topology.Switches{Create: "-make", Reconcile: "-mend", OneReplica: "-one"}
	tests := []struct {
		name    string
		give    func(t *testing.T, topo topology.Topology) []string // the messages
		want    string                                              // with sw
		wantOff string                                              // without
	}{
		{"a missing stream", func(t *testing.T, topo topology.Topology) []string {
			_, js := natstest.Connect(t, natstest.Run(t))
			_, err := topology.Lookup(t.Context(), js, topo)
			require.ErrorIs(t, err, topology.ErrMissing)
			return []string{err.Error()}
		}, "stream missing: METER_READS (create it, or start with -make): ", "stream missing: METER_READS (create it): "},
		{"a stream difference", func(t *testing.T, topo topology.Topology) []string {
			js := made(t, topo)
			cfg := streamConfig(t, js, topo.Stream)
			cfg.Discard = jetstream.DiscardOld
			_, err := js.UpdateStream(t.Context(), cfg)
			require.NoError(t, err)
			set, err := topology.Lookup(t.Context(), js, topo)
			require.NoError(t, err)
			return set.Warnings
		}, "(left as it is; -mend would change it)", "(left as it is; reconciling would change it)"},
		{"a durable to reconcile", func(t *testing.T, topo topology.Topology) []string {
			js := made(t, topo)
			c := topo.ConsumerConfig()
			c.MaxDeliver = 3
			_, err := js.UpdateConsumer(t.Context(), topo.Stream, c)
			require.NoError(t, err)
			_, err = topology.Lookup(t.Context(), js, topo)
			require.ErrorIs(t, err, topology.ErrMismatch)
			return []string{err.Error()}
		}, "; or start with -mend to update the durable", "; or reconcile to update the durable"},
		{"what reconciling changed", func(t *testing.T, topo topology.Topology) []string {
			js := made(t, topo)
			c := topo.ConsumerConfig()
			c.MaxDeliver = 3
			_, err := js.UpdateConsumer(t.Context(), topo.Stream, c)
			require.NoError(t, err)
			topo.Reconcile = true
			set, err := topology.Lookup(t.Context(), js, topo)
			require.NoError(t, err)
			return set.Reconciled
		}, "(changed by -mend)", "(changed by reconciling)"},
		{"replicas the server cannot make", func(t *testing.T, topo topology.Topology) []string {
			_, js := natstest.Connect(t, natstest.Run(t))
			topo.Replicas = 3
			_, err := topology.Ensure(t.Context(), js, topo)
			require.ErrorIs(t, err, topology.ErrMismatch)
			return []string{err.Error()}
		}, "by setting stream.replicas to 1 (-one): ", "by setting stream.replicas to 1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			topo := testTopology()
			topo.Switches = sw
			got := tt.give(t, topo)
			require.NotEmpty(t, got)
			assert.Contains(t, got[0], tt.want)

			got = tt.give(t, testTopology())
			require.NotEmpty(t, got)
			assert.Contains(t, got[0], tt.wantOff)
			for _, m := range got {
				assert.NotRegexp(t, ` -[a-z]`, m, "no switch is named")
			}
		})
	}
}
