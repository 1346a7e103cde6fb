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
// # Why not sony/gobreaker
//
// gobreaker v2.4.0, the well-kept library for this, lacks what the tests
// here hold the breaker to: its open state refuses a call (ErrOpenState)
// where this one holds it (TestAcquireBlocksWhileOpenThenProbes: a read
// refused would spend an attempt on the outage, or need a second hold of
// its own); its cool-down is one fixed Timeout, where a fleet's breakers
// must not probe together and must wait longer after each failed probe
// (TestFailedProbeReopensWithALongerCoolDown); any failure in half-open
// reopens it, and it cannot let fresh reads probe first or a read that
// failed before fail without deciding the round
// (TestFreshReadsProbeFirst, TestAFailedProbeOfAReadThatFailedBeforeDoes-
// NotDecideAlone), so a backlog of reads that always fail would keep it
// open; and its windows run on time.Now, not an injected clock
// (TestAWallClockStepDoesNotBlindTheWindow). IsExcluded and ReadyToTrip
// could carry the fresh-read counting and the silence, but not these.
//
// A Breaker is safe for concurrent use. Acquire returns the context's error
// when it ends while waiting.
package breaker
