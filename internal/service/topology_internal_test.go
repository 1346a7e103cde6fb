package service

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Before the first look-up of the topology there is no replicas series: a
// rule such as topology_replicas < 3 must not fire on a pod still
// connecting, as a 0 would make it.
func TestNoReplicasSeriesBeforeTheTopologyIsFound(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := newTopologyMetrics(reg, time.Now)
	n, err := testutil.GatherAndCount(reg, "meter_consumer_topology_replicas")
	require.NoError(t, err)
	assert.Zero(t, n)
	m.replicas.WithLabelValues("stream").Set(3)
	n, err = testutil.GatherAndCount(reg, "meter_consumer_topology_replicas")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}
