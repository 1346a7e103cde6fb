package stream

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// aged observes, in meter_consumer_settled_read_age_seconds, the age of a
// read settled for good (ack or term) at now (the server's clock), from
// its stream timestamp: the billing SLO's measure.
func (m *Metrics) aged(o Outcome, md *jetstream.MsgMetadata, now time.Time) {
	age := max(now.Sub(md.Timestamp), 0).Seconds()
	switch o {
	case OutcomeAck:
		m.ageAck.Observe(age)
	case OutcomeTerm:
		m.ageTerm.Observe(age)
	default:
		m.readAge.WithLabelValues(string(o)).Observe(age)
	}
}

// serverNow is the server's clock now, the one that stamped the reads.
func (c *Consumer) serverNow() time.Time {
	now, _ := c.server.now()
	return now
}
