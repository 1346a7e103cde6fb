// Package dlq builds and publishes the dead-letter copy of a meter read.
//
// A copy is the original payload, byte for byte, published with JetStream to
// "<prefix>.<original subject>" under the message id "dlq:<stream>:<seq>",
// so a crash between the copy and the TERM of the original, followed by a
// redelivery, never yields a second copy. The original headers are kept,
// except those that would change how the dead-letter stream stores the copy
// (Nats-Expected-*, Nats-TTL, Nats-Rollup, Nats-Schedule*); the original
// Nats-Msg-Id moves to Dlq-Original-Msg-Id. Provenance headers (Dlq-*) say why
// and when the read was dead-lettered.
//
// Publish returns nil only once JetStream has confirmed the copy (a duplicate
// of a copy already stored counts as confirmed); any other outcome wraps
// ErrPublish, and the caller must not let the original go.
//
// Publisher is safe for concurrent use.
package dlq
