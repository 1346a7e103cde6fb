// Package stream is the consumer pipeline: it pulls meter reads from a
// durable JetStream pull consumer shared by every replica, delivers each one
// downstream and settles it in exactly one way.
//
//   - success: Ack.
//   - transient failure, attempt < max attempts: a retry delay drawn with full
//     jitter for this attempt (the message's own delivery count), floored by
//     Retry-After; the read is held in the process and NAKed when the delay is
//     over (see delayer for why this beats NakWithDelay).
//   - transient failure at the last attempt, or a delivery already past the
//     budget: a dead-letter copy (reason exhausted), then TERM.
//   - permanent failure, including an invalid read: a dead-letter copy
//     (reason permanent), then TermWithReason(cause).
//   - a dead-letter copy JetStream did not confirm: the original is NAKed
//     with a delay, never terminated, and the failure is counted.
//
// What the delivery count cannot tell (hand-backs, credited sheds, the
// dead-letter decision) is kept in Records, one record per read: keyed by
// stream sequence, bound to the read by its stream timestamp (a record of
// another read at the same sequence is ignored), written on the revision it
// was read at (ErrRecordConflict: read again, apply again), and never
// written over a record that could not be read.
//
// It is the one package that touches jetstream.Msg. It runs on what
// package topology finds or creates on the server (the streams, the
// records bucket and the durable); it does not make them. Consumer.Run
// returns ErrConsumeStopped when the server ended the subscription.
// Metrics lists every metric.
// A Consumer is safe for concurrent use; Run is called once.
package stream
