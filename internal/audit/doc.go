// Package audit accounts for every read of a period of the source stream:
// billed, dead-lettered, not yet settled, or missing, and checked against
// the rate engine's own ledger when one is given. The binary's "consumer
// audit" calls it; it owns no flags.
//
// # What it reads
//
// The dead-letter stream whole, headers only, through an ordered consumer
// (jstool.Walk: ephemeral, no acks, memory storage, flow-controlled, at
// most a page of 256 messages in the client, deleted when done); then the source stream
// over the period by gets of each sequence (Auditor.GetWindow at once; a
// period by time finds its first sequence by a binary search on the
// stream timestamps), so that the audit's user needs no right to create
// or delete a consumer on the stream where the fleet's durable is; and the
// durable's info for its ack floor. Nothing is acked, nothing is
// published: it runs against a live fleet without disturbing it. It stops
// at the last sequence stored when the audit began.
//
// A gap (sequences no longer held) is reported by the period of the read
// before it: a period by time reports the gap before the first read after
// it, not the one before its own first read.
//
// # Telling reads apart
//
// A copy names its read by Dlq-Stream, Dlq-Sequence and Dlq-Published-At
// (the read's stream timestamp; the copy's Nats-Msg-Id is
// dlq:<stream>:<seq>:<unix ns> for the same reason). A copy is the read's
// when the sequence and the timestamp both match; a copy published before
// the source stream was created is of an earlier stream of that name and
// is counted apart (Summary.EarlierCopies), never taken for a read of this
// one. A copy without a Dlq-Published-At (an earlier version's) matches on
// the sequence alone, and only in a period by sequence.
//
// # Memory
//
// Bounded whatever the period. Copies are sorted by (sequence, timestamp)
// and the period's keys and the ledger's by key, each in an external merge
// sort (sorter.go): records are held up to Auditor.SortMemory/2 bytes, then
// sorted and spilled to an unlinked temporary file as a run; the runs are
// merged as they are read, one buffered reader each. The source walk meets
// the sorted copies in sequence order, and the keys meet the ledger in key
// order, so neither join holds more than one key's records. Findings and
// the dead-lettered reads go to temporary files of JSON lines as they are
// found and are read back when the report is written. What stays in memory
// is the summary's counters, the pages of the walks and the sorters'
// buffers.
//
// # Errors
//
// Sentinels, matched with errors.Is: jstool.ErrNoSuchStream (the source or
// the dead-letter stream), ErrNoSuchDurable, jstool.ErrNotConnected (the
// connection is closed or the server did not answer in time), ErrInvalid (a
// period, or a ledger without the column asked for). NATS errors are
// wrapped with %w. A finding is not an error:
// Result.Explained says whether there is any.
//
// # Concurrency
//
// An Auditor is not modified by Run; two runs may go at once. A Result is
// for one goroutine.
package audit
