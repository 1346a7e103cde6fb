// Package reliability holds the fault suite: Go tests that run the consumer
// binary as a subprocess against in-process NATS servers (a single node, a
// restarted node, a three-node JetStream cluster) and an HTTP downstream,
// inject one failure each, and end by checking the ledger: every read
// published is delivered (always under the same idempotency key) or present
// exactly once in the dead-letter stream, none is stuck in the consumer,
// none is dead-lettered twice, and none that a healthy downstream would
// accept is dead-lettered.
//
// The package has no non-test code. Long variants (bigger volumes, longer
// outages, a soak) are behind the "soak" build tag; see docs/RELIABILITY.md.
package reliability
