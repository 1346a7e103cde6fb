// Package lag exports the backlog of the durable consumer and the size of
// the dead-letter stream as Prometheus gauges, read from JetStream every
// interval: meter_consumer_pending_messages, _ack_pending_messages,
// _redelivered_messages and _dead_letter_stream_messages.
//
// The interval is jittered (each wait drawn uniformly from [interval/2,
// 3*interval/2]) so that a fleet of replicas started together does not read
// together, and a reading is shared by every scrape in between: a scrape
// never calls the server. Errors are counted and logged, and the last good
// values stay in place. A Reader is started once with Run.
package lag
