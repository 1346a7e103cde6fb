// Package dlq builds and publishes the dead-letter copy of a meter read.
//
// A copy is the original payload, byte for byte, published with JetStream to
// "<prefix>.<original subject>" under the message id
// "dlq:<stream>:<seq>:<stream timestamp, Unix ns>" (MsgID), so a crash
// between the copy and the TERM of the original, followed by a redelivery
// within the dead-letter stream's duplicate window, never yields a second
// copy, while a read at a sequence an earlier read of a deleted stream had
// gets a copy of its own; past the window, Stored finds the copy by its
// provenance (stream, sequence and Dlq-Published-At), and deletes the
// consumer it read with.
// The original headers are kept, except those nats-server acts on
// (ServerHeader: every Nats-* header and KV-Operation), which would make the
// dead-letter stream refuse, expire or roll up the copy; their names go in
// Dlq-Dropped-Headers, and the original Nats-Msg-Id moves to
// Dlq-Original-Msg-Id. Provenance headers (Dlq-*) say why and when the read
// was dead-lettered. A copy that does not fit the server's size limit once
// the Dlq-* headers are added has its payload truncated (Fit), marked with
// Dlq-Truncated and Dlq-Original-Size, when the source stream keeps the full
// read.
//
// Publish returns nil only once JetStream has confirmed the copy (a duplicate
// of a copy already stored counts as confirmed); any other outcome wraps
// ErrPublish, and the caller must not let the original go. A copy the server
// answered and refused also wraps ErrRejected (ErrTooLarge when it cannot be
// made to fit): it needs a person, not a quick retry.
//
// Publisher is safe for concurrent use.
package dlq
