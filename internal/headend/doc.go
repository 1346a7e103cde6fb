// Package headend holds no code: its Example is the runnable form of
// docs/HEAD-ENDS.md, a head-end publishing meter reads the way the consumer
// expects them: on meter.reads.<...>, checked against the contract of
// internal/meter before sending, under a Nats-Msg-Id equal to the read's
// idempotency key so that JetStream drops a resend within the stream's
// duplicate window, waiting for the stream's ack and retrying with
// full-jitter delays. It runs against an embedded server and pins what a
// resend, a subject no stream captures and a full stream answer; a test keeps
// the guide's copy of the publishing function equal to the example's.
package headend
