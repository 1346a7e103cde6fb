// Package engine is the replica's one view of the rate engine's health. Every
// call to the engine is reported to a View with its context (how often the
// read failed before, its latency, what the engine answered), and the adaptive
// limit, the retry budget, the replica-wide pause, the breaker's evidence and
// the charging of sheds all read their verdicts from it, so they cannot
// disagree about the engine.
//
// A read's failure is evidence about that read; the engine is judged across
// many reads. Each call weighs 2^-f, f being how often its read failed before:
// a first attempt weighs 1, the same read failing again weighs less and less.
// A window weighing less than MinWeight (10 first attempts) says nothing.
//
// A shed is load when it answers to concurrency. Each call carries how many
// calls were in flight when it was made; the View remembers the shed share of
// the last calls made in each band of concurrency (1, 2-3, 4-7, ..., 64 and
// more), and the share of the last Window counts only in excess of the share
// at the nearest lower band it knows (the background: reads failing on their
// own, a tariff's service down, an account over its quota, which no slowing
// down relieves), as a share of the calls that background left unshed. At
// the limit's least concurrency (LeastInFlight) the background is its own
// share. Above it, with no lower band known yet: when a band above sheds
// less than now, the sheds grew as the calls in flight fell and are not
// load (the end of a backlog, where the reads that always fail are all
// that is left); otherwise the background is none, so that the limit comes
// down and learns. Over the last Window (2s):
//
//   - Shedding: at least ShedShare (30%) of the weight was shed in excess of
//     the background (503, 429, a timeout, an unreachable engine). A shed
//     then says nothing about its read and is not charged to it.
//   - Overloaded: at least OverloadShare (50%) was shed in excess; or
//     FastShare (5%) was shed fast in excess, answered in under half the
//     engine's quickest usual answers, the 10th percentile of its latencies
//     (refused before any work was done, as a load shedder does; a 429 is
//     never fast); or the engine's latency shows a queue (below). The limit
//     comes down, the retry budget binds, and a Retry-After from several
//     reads may pause the replica.
//
// A queue shows as latency that answers to load. Latencies of answered calls
// are gathered into rounds of at least MinSamples calls lasting at least two
// baseline latencies; a round's median is compared with a baseline that
// follows the medians slowly (a time constant of BaselineWindow, four times
// faster down than up). A round is queued when its median is above Tolerance
// (1.5) times the baseline and at least MinRise (2ms) above it; three queued
// rounds in a row lasting QueueFor (500ms) or more are a queue (three
// rounds, however short, only stop the limit growing). A latency that merely spreads (the same
// distribution at 1 call and at 32) moves neither the median nor the
// baseline, and a slow tail does not move a median at all: unlike the
// least latency of a window, which a spread drags down, the median of
// a round compares like with like.
//
// Retry-After is always the floor of its own read's delay (package retry).
// The View turns it into a pause of the whole replica only when the engine
// throttles broadly: ThrottleReads (3) distinct reads carried it within
// Window while the engine is overloaded. The pause is the largest wait asked
// for, clamped to MaxPause (retry.max_server_wait) and jittered up to half as
// much again, never past MaxPause.
//
// Every window runs on the monotonic clock of Options.Clock: a step of the
// wall clock neither empties one nor keeps stale slots in it.
//
// A View is safe for concurrent use. It keeps no goroutine and no timer:
// verdicts are computed from the clock at the time they are asked for.
package engine
