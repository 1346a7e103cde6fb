// Package breaker is a circuit breaker for the downstream as a whole.
//
// It counts the outcomes of downstream calls over a sliding window. When,
// with at least MinCalls calls in the window, the share of transient
// failures reaches FailureRatio, it opens: Acquire blocks every caller, so
// reads are held instead of spending their attempts on an outage. After a
// jittered cool-down (so a fleet does not probe together, growing while
// probes keep failing) it turns half-open and lets Probes calls through;
// when all of them succeed it closes, and when one fails it opens again.
// Permanent failures (a 422 on one read) are answers from a healthy
// downstream and count as successes.
//
// A probe belongs to the half-open round that let it through: a slow probe
// that returns in a later round decides nothing. Release gives back a permit
// whose call ended without an answer (a shutdown), without deciding.
//
// A Breaker is safe for concurrent use. Acquire returns the context's error
// when it ends while waiting.
package breaker
