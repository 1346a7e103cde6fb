package demo

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the simulated rate engine's, served beside the consumer's
// in demo mode.
type Metrics struct {
	phase *prometheus.GaugeVec
}

// NewMetrics registers on reg meter_consumer_demo_rate_engine_phase: 1 for
// the phase the demo's rate engine is in (phase normal, overload or
// outage), 0 for the others, every phase initialised.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{phase: promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "meter_consumer", Subsystem: "demo", Name: "rate_engine_phase",
		Help: "1 for the phase the demo's simulated rate engine is in (normal, overload, outage; --demo-incidents), 0 for the others.",
	}, []string{"phase"})}
	m.set(PhaseNormal)
	return m
}

// set marks p as the phase in force.
func (m *Metrics) set(p Phase) {
	if m == nil {
		return
	}
	for _, q := range phases {
		v := 0.0
		if q == p {
			v = 1
		}
		m.phase.WithLabelValues(string(q)).Set(v)
	}
}
