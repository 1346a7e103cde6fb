package stream

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The kinds of state found at a read's stream sequence that belong to
// another read: the label of meter_consumer_record_mismatches_total.
const (
	mismatchRecord = "record" // a record in the records bucket
	mismatchCopy   = "copy"   // a dead-letter copy
)

// recordMetrics count what the records and the copies of one read meet of
// other reads and other writers.
type recordMetrics struct {
	mismatches      *prometheus.CounterVec
	recordConflicts prometheus.Counter
	recordSkips     prometheus.Counter
	lookupLeftovers prometheus.Counter
}

func newRecordMetrics(f promauto.Factory, ns string) recordMetrics {
	m := recordMetrics{
		mismatches: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "record_mismatches_total",
			Help: "Records and dead-letter copies found at a read's stream sequence that are another read's (the stream was re-created), ignored, by kind (record, copy).",
		}, []string{"kind"}),
		recordConflicts: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "record_conflicts_total",
			Help: "Writes of a read's record that met another writer's revision: the record was read again and the change applied to it.",
		}),
		recordSkips: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "record_writes_skipped_total",
			Help: "Writes of a read's record not made because the record could not be read first (a shed then goes unrecorded; the delivery count decides for a read whose record could not be read).",
		}),
		lookupLeftovers: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "dead_letter_lookup_leftovers_total",
			Help: "Consumers of a look-up for an earlier dead-letter copy that could not be deleted after use (the server removes them 30s after their last use).",
		}),
	}
	m.mismatches.WithLabelValues(mismatchRecord)
	m.mismatches.WithLabelValues(mismatchCopy)
	return m
}
