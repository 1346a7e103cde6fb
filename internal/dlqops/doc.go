// Package dlqops is what operators do with the dead-letter stream: see what
// is in it and why (List, Show, Stats), send reads back once the cause is
// fixed (Replay), and delete what must not be replayed (Purge). The binary's
// "consumer dlq list|show|stats|replay|purge" subcommands call it; it owns
// no flags, only ParseTimeFlag for --since and --until.
//
// # Reading the stream
//
// Every operation but Show walks the dead-letter stream in sequence order
// through an ordered consumer (jstool.Walk: ephemeral, no acks,
// flow-controlled), holding
// at most a page of 128 messages in the client, and deletes that consumer when
// done. An ordered consumer streams millions of messages at the server's pace
// with one pull per page, where a GetMsg per sequence would pay a round trip
// per message and probe every deleted sequence; Show is a single GetMsg. A
// walk stops at the last sequence stored when it began, so copies
// dead-lettered during a replay wait for the next run. Filters are applied in
// the client against the Dlq-* headers (the copy's subject prefix is not
// known here, so the original subject is matched on Dlq-Subject); Stats and
// Purge without a --meter filter ask for headers only. Purge keeps, of each
// selected copy, only what its mark needs (sequences, subjects, the source
// stream's name and a time), never its payload, before it asks for
// confirmation. Marks (see below) are passed over: no operation shows,
// counts, replays or purges one; Show of a mark's sequence prints it, and
// says it is a mark.
//
// # Replay guarantees
//
// A replayed read is the original payload, byte for byte, on the original
// subject (Dlq-Subject), with the copy's headers minus every Dlq-* header and
// Nats-Msg-Id, plus Nats-Msg-Id "replay:<dlq stream>:<dlq seq>",
// Dlq-Replayed-From and Dlq-Replay-Count (previous count + 1; a read
// dead-lettered again keeps the count in its headers, so it accumulates and
// MaxReplays stops loops). Publish directives the server stored with the copy
// are dropped too (Nats-Expected-*, Nats-TTL, Nats-Rollup, Nats-Schedule*):
// the dead-letter publish expected the dead-letter stream, and the source
// stream would refuse a replay carrying that expectation; the original's own
// directives were already dropped by dlq.Build.
//
// When SourceStream is set, its subject must be one of that stream's, and
// the ack must come from it (not asked of the server with
// Nats-Expected-Stream, which it would store with the replayed read). The copy is then marked replayed, and deleted only after the
// mark's ack; a failed publish or mark leaves it. Because the message id is derived from the copy, a replay run twice, or
// resumed after a crash between the publish and the delete, is dropped by the
// source stream's duplicate window (the ack says Duplicate, counted as such,
// and the copy is then deleted). Past that window a copy whose delete was
// lost would be republished; the downstream idempotency key is the last
// guard. Replays are paced by a time-based limiter using Now and Sleep, so
// tests need no real waiting.
//
// # Marks
//
// Before a replay or a purge deletes a copy, it stores a mark in the
// dead-letter stream (dlq.Mark, built by dlq.BuildMark, published expecting
// Stream and awaited): what was done (replayed or purged), the read as the
// copy named it (Dlq-Stream, Dlq-Sequence, Dlq-Published-At, Dlq-Subject),
// the copy's sequence, a replay's sequence in the source stream, Actor, the
// time and a purge's reason. The audit reads marks to tell a replayed or
// purged read from a billed one once its copy is gone. A mark's subject is
// <prefix>._mark.<original subject>; the prefix is the copy's subject less
// "." and Dlq-Subject, and a copy whose subject does not end that way
// cannot be marked, so it is kept. Its message id (mark:<kind>:<stream>:<copy
// seq>) makes a mark retried within the dead-letter stream's duplicate
// window a duplicate: a run resumed after a crash between a mark and its
// delete adds none.
//
// # Errors
//
// Sentinels, matched with errors.Is: jstool.ErrNoSuchStream (the
// dead-letter or the source stream is missing; the message names it and the
// flag to fix), ErrNoSuchSequence (Show), jstool.ErrNotConnected (the
// connection is closed or the server did not answer in time) and ErrInvalid
// (a filter, option or time flag). NATS errors are wrapped with %w, so
// jetstream.ErrStreamNotFound, jetstream.ErrMsgNotFound and
// nats.ErrConnectionClosed match too. Replay
// counts per-read failures in its summary and stops only when ctx is done
// or the server cannot be reached; Purge goes on past a copy whose mark was
// not stored (it is kept, and the purge then fails) and stops at a delete
// that failed.
//
// # Concurrency
//
// An Ops is not modified by its methods, so they may run concurrently when
// Out is safe for concurrent writes. Two replays of the same selection at
// once are safe: the second publish of a read is a duplicate, so is the
// second mark of a copy, and a copy already deleted is not an error.
package dlqops
