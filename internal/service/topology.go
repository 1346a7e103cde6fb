package service

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/meterline/meter-consumer/internal/topology"
)

// topologyMetrics say what the server keeps of what the service bills
// from: meter_consumer_topology_replicas{of} and
// meter_consumer_durable_paused.
type topologyMetrics struct {
	replicas    *prometheus.GaugeVec
	pausedUntil atomic.Int64 // unix nanoseconds; 0: not paused
}

// replicaRoles are the values of the of label.
var replicaRoles = []string{"stream", "dead_letter_stream", "records_bucket"}

func newTopologyMetrics(reg prometheus.Registerer, now func() time.Time) *topologyMetrics {
	f := promauto.With(reg)
	m := &topologyMetrics{replicas: f.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "meter_consumer", Name: "topology_replicas",
		Help: "Replicas of the source stream, the dead-letter stream and the records bucket, as found at start (no series until then: a rule on them does not fire on a replica not yet connected).",
	}, []string{"of"})}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "meter_consumer", Name: "durable_paused",
		Help: "1 while the durable is paused (as found at start, until its pause ends): the server delivers nothing.",
	}, func() float64 {
		if m.paused(now()) {
			return 1
		}
		return 0
	})
	return m
}

func (m *topologyMetrics) paused(now time.Time) bool {
	u := m.pausedUntil.Load()
	return u != 0 && now.UnixNano() < u
}

// reportTopology logs, once each, what the setup found that a person
// should know: a single copy of what the service bills from on a real
// server (Jepsen found acknowledged writes lost even at R3 with the
// default sync interval: see docs/OPERATIONS.md, Durability), and a paused
// durable; and sets the metrics.
func reportTopology(set *topology.Setup, topo topology.Topology, embedded bool, m *topologyMetrics, log *slog.Logger) {
	for i, n := range []int{set.Replicas.Stream, set.Replicas.DeadLetter, set.Replicas.Records} {
		m.replicas.WithLabelValues(replicaRoles[i]).Set(float64(n))
		if n == 1 && !embedded {
			log.Warn("a single copy of what the service bills from: one lost disk loses it; use 3 replicas across zones (see docs/OPERATIONS.md, Durability)",
				slog.String("of", replicaRoles[i]), slog.String("name", []string{topo.Stream, topo.DLQStream, topo.Bucket()}[i]),
				slog.Int("replicas", n))
		}
	}
	if !set.PausedUntil.IsZero() {
		m.pausedUntil.Store(set.PausedUntil.UnixNano())
		log.Warn("the durable is paused: the server delivers nothing until the pause ends",
			slog.String("durable", topo.Durable), slog.Time("paused_until", set.PausedUntil),
			slog.String("resume", resumeCommand(topo)))
	}
}

// pausedReason is what /readyz says while the durable is paused ("" once
// it is not).
func pausedReason(set *topology.Setup, topo topology.Topology, m *topologyMetrics, now time.Time) string {
	if !m.paused(now) {
		return ""
	}
	return fmt.Sprintf("the durable %s is paused until %s: nothing is delivered (%s)",
		topo.Durable, set.PausedUntil.UTC().Format(time.RFC3339), resumeCommand(topo))
}

func resumeCommand(topo topology.Topology) string {
	return fmt.Sprintf("nats consumer resume %s %s", topo.Stream, topo.Durable)
}
