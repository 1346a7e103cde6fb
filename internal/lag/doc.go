// Package lag exports, as Prometheus gauges read from JetStream every
// interval, what the fleet's dashboards and alerts need to know about the
// streams and the shared durable consumer:
//
//   - the durable's backlog and limit: meter_consumer_pending_messages,
//     _ack_pending_messages, _redelivered_messages and _max_ack_pending
//     (the durable's configured MaxAckPending);
//   - the source stream's size and limits: meter_consumer_stream_messages,
//     _stream_bytes, _stream_max_messages and _stream_max_bytes (-1 is
//     unlimited, as JetStream says), _stream_max_age_seconds (0 is
//     unlimited) and _stream_discard_new (1 when a full stream refuses
//     publishes, 0 when it drops its oldest messages);
//   - meter_consumer_oldest_unacked_age_seconds: the age of the oldest read
//     not yet settled, the first message after the durable's ack floor (0
//     when nothing is pending), the one the stream's max age removes first;
//   - meter_consumer_backlog_read_timestamp_seconds: when the durable's
//     backlog (the consumer info and the oldest unsettled read) was last
//     read successfully, as Unix time (0 before the first), so that a rule
//     can tell a stale reading from a steady one;
//   - meter_consumer_dead_letter_stream_messages, _dead_letter_stream_bytes
//     and _dead_letter_stream_max_bytes (-1 is unlimited);
//   - meter_consumer_records_bucket_present: 1 when the last reading found
//     the records bucket's stream (KV_<bucket>), 0 when the server said it
//     does not exist (logged once as a warning when it becomes so, and once
//     when it is there again); no series before the first reading that
//     found either. A fleet that retries nothing never touches the bucket
//     otherwise, so a bucket gone would be found only at a hand-back.
//
// The interval is jittered (each wait drawn uniformly from [interval/2,
// 3*interval/2]) so that a fleet of replicas started together does not read
// together, and a reading is shared by every scrape in between: a scrape
// never calls the server. Each request of a reading that fails is counted in
// meter_consumer_lag_read_errors_total and logged; the gauges it feeds keep
// their last values and the others are still refreshed. A Reader is started
// once with Run; Read is not safe for concurrent use with itself.
package lag
