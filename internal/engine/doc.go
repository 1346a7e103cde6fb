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
// out of the shares: a retry is a read chosen by its own failure (at the end
// of a backlog the reads that always fail are all that is left). Fewer than
// MinCalls (10) say nothing, and a share counts only beyond chance (two
// standard deviations of a share drawn from as many calls).
//
// # Trials
//
// Sheds are suspect when the window holds at least two and their share is
// above the background (the share a standing verdict found the reads' own;
// 0 without one) plus 5 points, beyond chance (three standard deviations
// of such a share). A suspect replica dips: from the next wall-clock
// multiple of DipEvery (250ms) it holds its calls in flight at half its
// limit for DipFor (50ms, or two latency baselines, or 15 first attempts'
// worth at its rate, if longer; 0.4 DipEvery at most), and reports
// the calls sent meanwhile as Low. Every replica that suspects the engine
// dips on the same multiples, a standing verdict or not, so a fleet that
// overloads an engine (each replica sees its sheds) sends less together,
// and a trial sees what the fleet's load does, not one replica's.
//
// A trial (run when sheds are suspect and no verdict of load stands) sets
// the shed share of the low calls against that of the normal ones sent in
// the same span, first attempts against first attempts and retries
// against retries (two strata; the retries counted once each side holds
// five): a retry is a read chosen by its own failure, and the limiter
// grants retries first, so a dip holds more of them. Each call is counted
// once the calls sent before it have had the time to be answered (twice
// the 90th percentile of the served latency: failures answered at once
// come back before the successes sent beside them), in the order they
// were sent. It is a sequential test (Wald's) of two hypotheses, stratum
// by stratum: the reads' own (the low share as high as the normal one)
// and load (the share over the background halved, or 2p-1 past half
// refused). Load is decided at odds of Confidence (19 to 1) and a drop
// beyond chance (three standard deviations, the strata's differences
// pooled as Cochran, Mantel and Haenszel pool them), on MinCalls a side, looked
// for once a dip, when its calls are all counted (looked for at every
// call, chance crossed the three standard deviations about four times as
// often: 25 against 6 of 2,000 simulated trials of reads failing on
// their own); the reads' own on three times that, at odds of
// Confidence^1.2 (about 34 to 1), after two dips, with the replica's
// calls in flight halved from 4 or more, the engine serving most of
// what it is sent, and no stratum's share falling in the dips beyond 2.5
// standard deviations (summed, one stratum's odds can outweigh another's
// drop): a replica that dipped alone, one that
// cannot send less and a fleet many times over an engine's capacity see the
// same share whatever they send. A trial whose dips shed more than the
// calls beside them, beyond chance, starts again; one undecided after
// MaxDips (16) ends, as does one whose window's share shed is back within
// 5 points of the background at face value (the burst it started on, a run
// of one account's throttled reads, has passed: dipping on, 13 times in a
// backlog's 1.7s, held the replica at 0.88 of a bare client). Until a trial decides, the limit comes down on sheds
// only where the engine refuses most of what it is sent (Shedding, below):
// a share shed is no evidence of load until a dip shows it fall, and
// brought down on 30% of a trial's calls, an engine failing 40% at random
// held four replicas at a median of 23-75 of their 128 calls. A verdict of
// the reads' own sets the limit back to what it was when the trial began
// (Feedback.Trying, Feedback.Restore), and ends the dip under way or
// pending (Feedback.EndDip): it is reached once the second dip begins,
// whose calls it does not need, and a replica of the partial mix at once,
// held at half its limit for it, billed a median 0.89 of a bare client's
// rate with the production policy (8 runs; 0.915 with short delays)
// against 0.915 with the dip ended (22 runs; 0.94 in 10). A verdict
// stands for Standing (30s). A verdict of load is tried again, once, from
// the limit it was found at (Feedback.Restore), when 30 calls sent after
// it at 0.6 of the trial's calls in flight or less (retries too) are shed
// as much as the trial's normal first attempts, on the odds the reads' own
// needs, while the engine does not refuse most: sending less changed
// nothing, and the trial's odds may have been chance, or the replica's
// fleet may not have come down yet, which the fleet's dips tell apart.
//
// # Verdicts
//
//   - Shedding: a call shed within the last second, and a verdict of load
//     stands; or the engine refuses most of what it is sent (OverloadShare,
//     50%, beyond chance, over 30 first attempts) and no verdict of the
//     reads' own stands. The read is not charged for its shed, and the limit
//     comes down on it; at the read's last attempt, only where a verdict of
//     load stands (Loaded): refusing most is a share, not a trial's finding,
//     and a read's last call is charged on it. While a trial runs and may
//     still decide (Trying), a read's last shed awaits its verdict
//     (Verdict): the stream package holds the read, its shed credited, and
//     calls it again only on a verdict of load. On a verdict of load the shed call also keeps its
//     slot until a round trip from its start (Feedback.Pace), as a served
//     call would: answered at once, a shed freed its slot for the next call
//     at once, and a fleet a few calls over an engine's capacity sent a
//     call a millisecond in each of them, each shed. Only on a strong
//     verdict: found with four calls in flight or more outside the dips,
//     or with none of the dips' calls shed (ten at least), the fleet
//     sending less having emptied the engine's sheds. A replica calling a
//     call or two at a time cannot halve what it sends in its dips: its
//     verdict may be its fleet's, or only that its own calls fare better
//     when it sends fewer (one joining an engine that others keep full was
//     refused 98% of its calls, and half of those in its dips), and chance
//     does not empty a dip of ten calls at a share that others keep high.
//     Not without a strong verdict: a replica joining an engine that
//     others keep full wins its calls only as often as it sends them.
//
//   - Overloaded: shedding on a strong verdict of load (or, for a replica
//     that cannot dip, shedding over 10 first attempts), the engine
//     refusing most of what it is sent now. The retry budget binds.
//
//   - Pause: Retry-After is always the floor of its own read's delay
//     (package retry). The whole replica pauses only when the engine has
//     refused most of what it is sent for a second, though the call was
//     sent alone (the replica
//     down to one call in flight; or a replica that cannot dip): the longest
//     wait asked within Quiet, clamped to MaxPause, jittered up to half as
//     much again. What it refused before a pause, and the silence during it,
//     are forgotten at it.
//
//   - Serving: the engine is silent when it has failed every call sent since
//     its last answer for Quiet (250ms, or four latency baselines), 9.2 mean
//     gaps between its last 16 answers and twice the longest of them, over a
//     run of failed calls beyond chance at the share failing before; before
//     its first answer, four times Quiet. The breaker opens only on a silent
//     engine.
//
//   - Down, for one read: since the engine last answered a call, the first
//     attempts of more other reads failed than chance explains given the
//     share of first attempts that failed before (odds under 1 in 10,000: two
//     for a healthy engine, seven where a quarter of the reads fail on their
//     own; never, where more than about half do). A read whose last attempt
//     fails then is not exhausted by it.
//
// A decrease taken on the engine refusing most, with no verdict of load,
// is checked once the calls sent in a horizon after it are answered (the
// horizon extended, four times at most, until 10 first attempts were sent
// in it: the retries granted first may take most of a halved limit): the
// first attempts sent in the horizon before it, in the order sent, refused
// less than most and no more at the end than at the start, by a replica
// calling four or more at a time, and no less once its halved limit made
// it send less (no drop beyond three standard deviations), it is undone
// (Feedback.Restore).
// A replica's first answers are its failures answered at once, ahead of
// the successes sent beside them; a replica that overruns an engine is
// refused most in any order, more as it sends more, less as it sends less.
//
// A queue in the latency (below) trims the limit and holds its growth; it
// binds no budget and credits nothing.
//
// # A queue
//
// A queue shows as latency that answers to load. Latencies of answered calls
// are gathered into rounds of at least MinSamples calls lasting at least two
// baseline latencies; a round's median is compared with a baseline that
// follows the medians slowly (a time constant of BaselineWindow, four times
// faster down than up), and that the dips measure: the median latency of
// every 32 calls sent during dips, where lower, is the baseline, the
// engine's latency while its fleet sends less (a fleet that fills the
// engine's queue from its first round on shows no queue against rounds
// alone). A round is queued when its median is above Tolerance
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
