// Package downstream delivers a validated meter read to the system that bills
// it. Sink is the interface the consumer pipeline calls; HTTP is the sink the
// binary uses: it POSTs the normalised read as JSON under the read's stable
// idempotency key, over a pooled transport sized for the consumer's
// concurrency, and classifies every outcome with package classify (including
// Retry-After). Errors returned by Deliver are always *classify.Error.
//
// HTTP is safe for concurrent use.
package downstream
