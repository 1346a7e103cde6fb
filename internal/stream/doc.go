// Package stream is the consumer pipeline: it pulls meter reads from a
// durable JetStream pull consumer shared by every replica, delivers each one
// downstream and settles it in exactly one way.
//
// A read's path, file by file:
//
//   - puller.go: Consume pulls batches into the client buffer; follow.go
//     stops pulling while the breaker is open or the park is full, and
//     resumes it.
//   - consumer.go (dispatcher): each pulled read goes to an idle worker, or
//     is parked (park.go: oldest first until a worker takes it) when the
//     breaker is open, reads are parked already, or no worker was free
//     for SpillAfter; lease.go wraps it so that a delivery the connection
//     may have lost is dropped unsettled.
//   - pool.go: Concurrency workers take parked reads first, then pulled
//     ones. keepalive.go is the one owner of keep-alives: it sends every
//     InProgress, for each worker's read in flight and for every read
//     waiting in the process (held or parked).
//   - handle.go: a worker handles one delivery: before (metadata, the
//     record from records.go, decoding), then decide (verdict.go) gives its
//     fate, call delivers it once the breaker and the limit let it
//     through (engine.go: the engine's view and the controls acting on it,
//     no-ops when off), decide again, and settle carries the fate out.
//   - the fates: Ack; retry (hold.go holds the read for a full-jitter
//     delay of its attempt, floored by Retry-After, then NAKs it, past the
//     retry budget when the engine is overloaded; see retries for why not
//     NakWithDelay; recall.go pulls it back at once); dead-letter
//     (deadletter.go: the decision recorded, the copy stored, then TERM; a
//     copy not confirmed holds the read, never TERMs it); hand back at a
//     stop (recorded, NAKed, uncharged).
//
// The table of fates is docs/SETTLEMENT.md's, asserted row by row by
// TestSettlementTable.
//
// What the delivery count cannot tell (hand-backs, credited sheds, the
// dead-letter decision) is kept in Records, one record per read: keyed by
// stream sequence, bound to the read by its stream timestamp (a record of
// another read at the same sequence is ignored), written on the revision it
// was read at (ErrRecordConflict: read again, apply again), and never
// written over a record that could not be read.
//
// It is the one package that touches jetstream.Msg, and in it one type
// settles one: a delivery (delivery.go) is made of each message as it is
// pulled, with its lease, and is then what the workers, the park, the
// held retries and the keep-alive loop hold; it alone acks, NAKs,
// terminates and keeps its message alive, and drops each signal once its
// lease may have run out. It runs on what
// package topology finds or creates on the server (the streams, the
// records bucket and the durable); it does not make them. Consumer.Run
// returns ErrConsumeStopped when the server ended the subscription.
// Metrics lists every metric.
// A Consumer is safe for concurrent use; Run is called once.
package stream
