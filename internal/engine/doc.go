// Package engine is the replica's one view of the rate engine's health. Every
// call to the engine is reported to a View with its context (how often the
// read failed before, its latency, what the engine answered, whether it was
// sent during a dip), and the adaptive limit, the retry budget, the pause,
// the breaker's evidence and the charging of sheds all read their verdicts
// from it, so they cannot disagree about the engine.
//
// # The principle
//
// The engine is overloaded when its answers change with the load the fleet
// sends: the latency of served calls rises with what is in flight (a queue),
// or the share it refuses rises with it. A refusal whose share stays the same
// when the fleet sends less is not load, whatever its status and however fast
// it comes back: it is the reads' own (a tariff whose service is down, an
// account over its quota), or a partial failure of the engine that no pacing
// cures. What one call looks like (a 503 answered at once, a 429) says
// nothing: a real engine answers its per-read failures at once too.
//
// # Evidence
//
// Shares are judged on the last Calls (128) first attempts, none older than
// MaxAge (1m): counted in calls, not time, so a replica at 10 reads a second
// and one at 2,000 judge an engine on the same evidence. Retries are left
// out: a retry is a read chosen by its own failure (at the end of a backlog
// the reads that always fail are all that is left). Fewer than MinCalls (10)
// say nothing, and a share counts only beyond chance (two standard
// deviations of a share drawn from as many calls).
//
// # Trials
//
// Sheds are suspect when the window holds at least two and their share is
// beyond chance above the background (the share a standing verdict found the
// reads' own; 0 without one; three standard deviations over a background).
// A suspect replica dips: from the next wall-clock multiple of DipEvery
// (250ms) it holds its calls in flight at half its limit for DipFor (100ms,
// or two latency baselines if longer), and reports the first attempts sent
// meanwhile as Low. Every replica that suspects the engine dips on the same
// multiples, a standing verdict or not, so a fleet that overloads an engine
// (each replica sees its sheds) sends less together, and a trial sees what
// the fleet's load does, not one replica's. A dip to half a limit the
// engine's servers still fill costs no goodput.
//
// A trial (run when sheds are suspect and no verdict of load stands) sets the
// shed share of the low first attempts against that of the normal ones sent
// in the same span, in a sequential test (Wald's) of two hypotheses: the
// reads' own (the low share as high as the normal one) and load (the share
// over the background halved). Load is decided at odds of Confidence (19 to
// 1); the reads' own at odds of Confidence^1.6 (about 110 to 1) and after two
// dips at least, because a replica that dipped alone (its fleet not
// suspecting yet, a late joiner) sees the same share whatever it sends, and
// the engine's load taken for the reads' own would be charged to them. A
// trial whose dips shed more than the calls beside them, beyond chance, saw
// the engine's load grow under it (a fleet's slow start) and starts again;
// one undecided after MaxDips (16) ends. A verdict stands for Standing
// (30s), then the engine is tried again if the sheds go on.
//
// # Verdicts
//
//   - Shedding: a verdict of load stands, or the engine refuses most of what
//     it is sent (OverloadShare, 50%, beyond chance) and no trial found that
//     the reads' own. A shed then is the engine's: its read is not charged,
//     and the limit comes down on it (Feedback.Decrease).
//   - Overloaded: shedding, or a queue in the latency (below). The retry
//     budget binds.
//   - Pause: Retry-After is always the floor of its own read's delay
//     (package retry). The whole replica pauses only when the engine refuses
//     most of what it is sent and a trial found that it does so whatever the
//     replica sends (or the replica cannot dip): the longest wait asked
//     within Quiet, clamped to MaxPause (retry.max_server_wait), jittered up
//     to half as much again. An engine that refuses most because the fleet
//     overloads it gets a lower limit instead; a few reads throttled pause
//     nothing. What it refused before a pause is forgotten at it.
//   - Serving: the engine is silent when it has failed every call sent for
//     Quiet (1s, or four latency baselines if longer) without answering one;
//     a call sent before its last answer says nothing of it. The breaker
//     opens only on a silent engine, so quick refusals of an engine that
//     serves others never open it, and the replica's first calls, or those
//     after its own pause, get the benefit of the doubt for Quiet.
//   - Down, for one read: since the engine last answered a call, the first
//     attempts of more other reads failed than chance explains given the
//     share of first attempts that failed before (the fewest whose run has
//     odds under 1 in 10,000: two for a healthy engine, seven where a quarter
//     of the reads fail on their own; never, where more than about half do).
//     A read whose last attempt fails then is not exhausted by it: its
//     failure cannot be told from an outage the breaker has not judged yet.
//
// # A queue
//
// A queue shows as latency that answers to load. Latencies of answered calls
// are gathered into rounds of at least MinSamples calls lasting at least two
// baseline latencies; a round's median is compared with a baseline that
// follows the medians slowly (a time constant of BaselineWindow, four times
// faster down than up). A round is queued when its median is above Tolerance
// (1.5) times the baseline and at least MinRise (2ms) above it; three queued
// rounds in a row lasting QueueFor (500ms) or more are a queue (three rounds,
// however short, only stop the limit growing). A latency that merely spreads
// (the same distribution at 1 call and at 32) moves neither the median nor
// the baseline, and a slow tail does not move a median at all.
//
// Every window runs on the monotonic clock of Options.Clock; only the dips'
// multiples are read off its wall clock, so that replicas on different
// machines dip together.
//
// A View is safe for concurrent use. It keeps no goroutine and no timer:
// verdicts are computed from the clock at the time they are asked for, and a
// dip is carried out by the limiter (package limit) it is handed to.
package engine
