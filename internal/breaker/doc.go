// Package breaker is a circuit breaker for the downstream as a whole.
//
// An outage is fresh reads failing: it counts the outcomes of calls of
// reads that had not failed before over a sliding window (a read failing
// again is evidence about that read, not about the downstream, and is not
// counted). When, with at least MinCalls such calls in the window, the share
// of transient failures reaches FailureRatio, and the downstream is silent
// (Options.Silent: it has failed every call for a while without answering
// one, judged by the engine's view), it opens: Acquire blocks every
// caller, so reads are held instead of spending their attempts on an
// outage. After a jittered cool-down (so a fleet does not probe together,
// growing while probes keep failing) it turns half-open and lets Probes
// calls through, fresh reads first whenever one is waiting; when Probes of
// them succeed it closes. A failed probe of a fresh read opens it again; a
// failed probe of a read that failed before does not decide the round
// alone: its place goes to another probe, and only Probes such failures in
// one round open it again. So a backlog holding a few reads that always
// fail lets the breaker close. Permanent failures (a 422 on one read) are
// answers from a healthy downstream and count as successes.
//
// A probe belongs to the half-open round that let it through: a slow probe
// that returns in a later round decides nothing. Release gives back a permit
// whose call ended without an answer (a shutdown), without deciding.
//
// The window runs on the monotonic clock of Options.Clock: a step of the
// wall clock neither empties it nor leaves it blind.
//
// A Breaker is safe for concurrent use. Acquire returns the context's error
// when it ends while waiting.
package breaker
