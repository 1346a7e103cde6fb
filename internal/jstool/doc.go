// Package jstool is what the operator tools ("consumer audit", internal/audit;
// "consumer dlq", internal/dlqops) share in reaching JetStream: they fail
// fast when the connection is down (CheckConn), find a stream or say which
// flag names it (Lookup), walk a stream in sequence order without
// disturbing the fleet (Walk), and say the same thing when the server
// cannot be reached (Wrap).
//
// # Walking a stream
//
// Walk reads through an ordered consumer: ephemeral, no acks, memory
// storage, flow-controlled, a page of messages at a time in the client
// (WalkOptions.PageSize). It stops at the last message stored when the
// stream's info was read, so what is stored while it runs is left for the
// next walk, and it deletes its consumer when done rather than leaving it
// to the server's inactivity threshold. When no message comes for
// WalkOptions.IdleWait it asks the server whether any are left: messages
// can be deleted while a walk runs.
//
// # Errors
//
// Sentinels, matched with errors.Is: ErrNoSuchStream (Lookup: the message
// names the stream and the flag to fix) and ErrNotConnected (the connection
// is closed or the server did not answer in time). NATS errors are wrapped
// with %w, so jetstream.ErrStreamNotFound and nats.ErrConnectionClosed
// match too. internal/audit and internal/dlqops return these sentinels
// for a missing stream and NATS out of reach.
//
// # Concurrency
//
// The functions keep no state; two walks of one stream may run at once.
package jstool
