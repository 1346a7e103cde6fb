package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// StateMetrics say, from process start, whether the replica consumes and
// why not, and count the NATS connection's events.
type StateMetrics struct {
	conn  *prometheus.CounterVec
	ready *readiness
}

// The NATS connection events counted in
// meter_consumer_nats_connection_events_total.
const (
	EventDisconnected = "disconnected"
	EventReconnected  = "reconnected"
)

// NewStateMetrics registers on reg, read at each scrape from the moment
// the process starts: meter_consumer_consuming (1 while the replica
// consumes: connected and pulling), meter_consumer_not_consuming{reason}
// (1 for the reason it does not, one of Reasons; all 0 while it consumes),
// and meter_consumer_nats_connection_events_total{event} (disconnected,
// reconnected).
func NewStateMetrics(reg prometheus.Registerer) *StateMetrics {
	f := promauto.With(reg)
	m := &StateMetrics{
		conn: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meter_consumer", Name: "nats_connection_events_total",
			Help: "Events of the NATS connection, by event: disconnected (lost, each logged), reconnected.",
		}, []string{"event"}),
		ready: newReadiness(),
	}
	m.conn.WithLabelValues(EventDisconnected)
	m.conn.WithLabelValues(EventReconnected)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "meter_consumer", Name: "consuming",
		Help: "1 while this replica consumes (connected to NATS, the durable found, pulling), 0 otherwise; from process start.",
	}, func() float64 {
		ok, _, _ := m.ready.state()
		return b2f(ok)
	})
	reg.MustRegister(notConsuming{r: m.ready, desc: prometheus.NewDesc("meter_consumer_not_consuming",
		"1 for the reason this replica does not consume (starting, connecting, refused, streams, disconnected, paused, stopped), 0 for the others; all 0 while it consumes.",
		[]string{"reason"}, nil)})
	return m
}

// event counts a connection event.
func (m *StateMetrics) event(e string) { m.conn.WithLabelValues(e).Inc() }

// notConsuming exports meter_consumer_not_consuming from the readiness at
// each scrape, every reason present.
type notConsuming struct {
	r    *readiness
	desc *prometheus.Desc
}

func (c notConsuming) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c notConsuming) Collect(ch chan<- prometheus.Metric) {
	ok, why, _ := c.r.state()
	for _, r := range Reasons() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, b2f(!ok && r == why), r)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
