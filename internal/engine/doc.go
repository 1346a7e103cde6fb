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
// Where retries are most of a window's weight (the end of a backlog, where
// the reads that always fail are all that is left) only fast sheds count:
// retries are the reads chosen by their own failures, and only a refusal
// before any work says the engine, not the read, turned them away. In a
// steady stream they never are: a read's retries weigh 1/2 + 1/4 + ... < 1
// together. Elsewhere retries' sheds count only up to the share of first
// attempts shed beside them: as a backlog ends, the retries of the reads
// that always fail would otherwise lift the share of an engine that serves
// every other read past any threshold. Over the last Window (2s):
//
//   - Shedding: at least ShedShare (30%) of the weight was shed (503, 429, a
//     timeout, an unreachable engine). A shed then says nothing about its
//     read and is not charged to it.
//   - Overloaded: at least OverloadShare (50%) was shed; or FastShare (5%)
//     was shed fast: answered in under half the latency baseline, beyond
//     the share of the last 256 answered calls that quick and beyond chance
//     (two standard deviations of as many sheds at that share). A load
//     shedder refuses before any work; a read's own 503 of an engine whose
//     latency spreads is as often quick as its 200s; a 429 is never fast.
//     Or the engine's latency shows a queue (below) and it still answers:
//     a call answered within four baselines (100ms at least) or two of the
//     last round's medians, so that the last queue of a busy engine is no
//     verdict on the reads left once it answers no one. The limit comes down,
//     the retry budget binds, and a Retry-After from several reads may
//     pause the replica.
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
// Serving: at least ServingShare (10%) of the weight over Window was
// answered, and a call was answered within four baselines (100ms at
// least). A shed then is load or the read's own, never an outage: the
// breaker does not count it.
//
// Down, for one read: another read's first attempt failed within Window
// after the engine had answered no one for four baselines (100ms at least),
// and nothing was answered since. A read whose last attempt fails then is
// not exhausted by it: its failure cannot be told from the outage, which
// the breaker may not have seen enough fresh reads to judge yet.
//
// Retry-After is always the floor of its own read's delay (package retry).
// The View turns it into a pause of the whole replica only when the engine
// throttles broadly: ThrottleReads (3) distinct reads carried it within
// Window, on at least ThrottleShare (3%) of the calls' weight, while the
// engine is overloaded. The pause is the largest wait asked
// for, clamped to MaxPause (retry.max_server_wait) and jittered up to half as
// much again, never past MaxPause.
//
// Every window runs on the monotonic clock of Options.Clock: a step of the
// wall clock neither empties one nor keeps stale buckets in it.
//
// A View is safe for concurrent use. It keeps no goroutine and no timer:
// verdicts are computed from the clock at the time they are asked for.
package engine
