package lag

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// gauges are the reader's metrics, all in namespace meter_consumer.
type gauges struct {
	pending, ackPending, redelivered, maxAckPending prometheus.Gauge

	streamMsgs, streamBytes, streamMaxMsgs, streamMaxBytes, streamMaxAge, streamDiscardNew prometheus.Gauge
	oldestUnacked, backlogReadAt                                                           prometheus.Gauge

	deadLetters, deadLetterBytes, deadLetterMaxBytes prometheus.Gauge
	deadLetterMaxAge, deadLetterOldest               prometheus.Gauge
	errors                                           prometheus.Counter

	// bucketPresent has no label: its one series is made at the first
	// reading that finds the bucket or finds it gone, none before.
	bucketPresent *prometheus.GaugeVec
}

func newGauges(reg prometheus.Registerer) gauges {
	f := promauto.With(reg)
	g := func(name, help string) prometheus.Gauge {
		return f.NewGauge(prometheus.GaugeOpts{Namespace: "meter_consumer", Name: name, Help: help})
	}
	return gauges{
		pending:       g("pending_messages", "Reads in the stream not yet delivered to the durable consumer (its backlog)."),
		ackPending:    g("ack_pending_messages", "Reads delivered and not yet settled, including those waiting out a retry delay."),
		redelivered:   g("redelivered_messages", "Reads delivered more than once and not yet settled."),
		maxAckPending: g("max_ack_pending", "The durable consumer's MaxAckPending: at this many ack-pending reads the server delivers nothing more."),

		streamMsgs:       g("stream_messages", "Messages held in the source stream, settled ones included."),
		streamBytes:      g("stream_bytes", "Bytes held in the source stream, settled messages included."),
		streamMaxMsgs:    g("stream_max_messages", "The source stream's MaxMsgs; -1 is unlimited."),
		streamMaxBytes:   g("stream_max_bytes", "The source stream's MaxBytes; -1 is unlimited."),
		streamMaxAge:     g("stream_max_age_seconds", "The source stream's MaxAge; 0 is unlimited."),
		streamDiscardNew: g("stream_discard_new", "1 when the full source stream refuses new messages (discard new), 0 when it drops its oldest (discard old)."),
		oldestUnacked:    g("oldest_unacked_age_seconds", "Age of the oldest read not yet settled (the first after the durable's ack floor); 0 when nothing is pending."),

		backlogReadAt: g("backlog_read_timestamp_seconds", "Unix time of the last reading of the durable's backlog that succeeded (pending, ack pending, the oldest unsettled read); 0 before the first."),

		deadLetters:        g("dead_letter_stream_messages", "Reads held in the dead-letter stream."),
		deadLetterBytes:    g("dead_letter_stream_bytes", "Bytes held in the dead-letter stream."),
		deadLetterMaxBytes: g("dead_letter_stream_max_bytes", "The dead-letter stream's MaxBytes; -1 is unlimited. A full dead-letter stream refuses new copies."),
		deadLetterMaxAge:   g("dead_letter_stream_max_age_seconds", "The dead-letter stream's MaxAge (an operator's retention); 0 is unlimited. The server deletes a copy at that age, seen or not."),
		deadLetterOldest:   g("dead_letter_oldest_age_seconds", "Age of the oldest copy held in the dead-letter stream (marks of replayed and purged copies left out); 0 when it holds none."),
		errors: f.NewCounter(prometheus.CounterOpts{Namespace: "meter_consumer", Name: "lag_read_errors_total",
			Help: "Requests of a backlog reading that failed; the gauges they feed keep their last values."}),
		bucketPresent: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: "meter_consumer", Name: "records_bucket_present",
			Help: "Whether the last reading found the records bucket: 1 found, 0 the server says it does not exist (no series before the first reading; a failed look-up keeps the last value)."}, nil),
	}
}
