package service_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// The topology's messages name the binary's flags where they say the fix.
func TestTheTopologyNamesTheBinarysFlags(t *testing.T) {
	t.Parallel()
	assert.Equal(t, topology.Switches{Create: "--create-streams", Reconcile: "--reconcile", OneReplica: "--replicas 1, CONSUMER_REPLICAS=1"},
		service.Topology(config.Default()).Switches)
}
