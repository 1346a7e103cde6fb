// Package limit is an adaptive limit on the calls one replica has in flight
// to the downstream, so that a fleet finds and holds the rate engine's
// capacity without talking to each other.
//
// The algorithm is AIMD with slow start, as TCP congestion control, with
// two signs of overload: a call the engine shed or could not answer in time
// (503, 429, a timeout, a refused connection: Overloaded), and a smoothed
// latency risen above Tolerance times the replica's own baseline (the least
// latency seen over BaselineWindow) and by at least MinRise (2ms: a fast
// engine's jitter on a loaded client is not a queue), which says the
// engine's queue is growing before it sheds. The limit starts at Initial (1), grows by one
// per answered call (doubling each round trip) until the first sign of
// overload, then by one per round trip; a rising latency multiplies it by
// Backoff (0.9), a shed by ShedBackoff (0.5), each at most once per round
// trip. It stays within [Min, Max], and grows only while in use.
//
// The baseline is short-lived on purpose: a replica that joins a loaded
// engine sees only queued latencies and takes them for the baseline, which
// would let it crowd out the replicas that knew better. A shed halves every
// replica at once, the engine's queue empties, and all of them learn the
// same unloaded latency; in a simulation of four replicas joining one after
// the other (TestReplicasConvergeOnAFairShare) they end on equal limits,
// the engine's queue at half its servers, and a shed in under 1% of round
// trips.
//
// Why AIMD: independent flows that each increase additively and decrease
// multiplicatively converge to a fair share of a shared bottleneck (Chiu and
// Jain, 1989), which is what replicas of a fleet are; the engine's explicit
// shedding maps directly onto its loss signal, and the latency signal keeps
// the engine's queue short (its latency near unloaded) rather than full.
// Vegas- or gradient-style limiters (Netflix concurrency-limits, failsafe-go's
// adaptivelimiter) steer by latency alone: a shed answered at once looks
// fast to them, and their baseline drifts up with a queue that never empties.
//
// A 503 or 429 with Retry-After is the engine speaking about itself: Release
// pauses every call of the replica for that long, plus up to half as much
// again drawn from Rand, so that a fleet told to wait does not come back in
// one instant.
//
// A Limiter is safe for concurrent use; Acquire blocks until a slot is free
// or its context ends.
package limit
