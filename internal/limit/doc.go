// Package limit is an adaptive limit on the calls one replica has in flight
// to the downstream, so that a fleet finds and holds the rate engine's
// capacity without talking to each other.
//
// The algorithm is AIMD with slow start, as TCP congestion control. It does
// not judge the engine itself: every call's slot is given back with a Signal
// the engine's view (package engine) made of the call, so that the limit,
// the retry budget, the pause and the breaker read one verdict. The limit
// starts at Initial (1), grows by one per answered call (doubling each round
// trip) until the first sign of overload. A shed the engine's view found to
// be the engine's load (Overloaded) multiplies it by ShedBackoff (0.5), and
// from there it follows CUBIC's window (RFC 9438, in calls): the cubic of
// the time since the decrease, back at the limit it fell from after K =
// cbrt(that limit x (1-ShedBackoff) / 0.4) seconds (1.4s from 2, 2.9s from
// 20), flat around it, then faster. Each step over an engine's room is shed
// until the replica comes down, and a replica stepping up again every Growth
// (200ms) from one or two calls, as each of 16 sharing a room of 24 does,
// had the fleet shed 26.4-28.5% of its calls; back at its last maximum only
// after K, 16.8-21.7% (two runs of the engine matrix each). A queue in the
// engine's latency (Queued) multiplies the limit by Backoff (0.9), and from
// there it grows by one each round trip, or each Growth where the round trip
// is shorter. Each decrease comes at most once per round trip. A shed of an
// engine the fleet's own load overloads (Paced) also keeps its slot until a
// round trip from the call's start, as the call would have had it served, so
// that a slot over the engine's capacity sends one call a round trip, not
// one a millisecond, each shed at once. A read's own failure, or a shed the
// view has not found to be load, is Ignored or Refused: it says nothing of
// the engine's load. Only until the engine has answered one of the
// replica's calls does a refusal keep its slot, 1ms and doubling with each
// refusal in a row up to 10ms: with nothing answered, calling again at once
// gets nothing more, and a replica started against an engine down called it
// thousands of times a second. The limit stays within [Min, Max], and grows
// only while in use.
//
// Why AIMD: independent flows that each increase additively and decrease
// multiplicatively converge to a fair share of a shared bottleneck (Chiu and
// Jain, 1989), which is what replicas of a fleet are; the engine's explicit
// shedding maps directly onto its loss signal, and the latency signal keeps
// the engine's queue short (its latency near unloaded) rather than full.
// CUBIC keeps the multiplicative decrease and spaces the increases by
// time, not by round trips, which is what a fleet of replicas each holding
// a call or two of a millisecond engine needs.
//
// Acquire grants slots to retries (reads that failed before) ahead of first
// attempts, so a retry that is due is never starved by new reads. Pause
// holds every new call until a time: the engine's view asks for it when the
// engine refuses most calls whatever the replica sends, and asks to wait.
// Dip holds the calls in flight at half the limit, or at half the most the
// replica had in flight since the last dip if fewer (below Min too: it is an
// experiment, not the limit) for a moment: the view asks for it to see
// whether the engine sheds less when the fleet sends less; a slot granted
// during a dip is Low, and a call answered in a dip does not grow the limit:
// the engine fares better while the fleet sends less, which says nothing of
// its room at the full limit (grown in their dips, sixteen replicas came
// back from each 1-3 calls over the capacity engine's room, together);
// EndDip ends a dip, under way or pending, that the view no longer needs. Mark notes the limit and Restore sets it back (a
// trial found the sheds it came down on the reads' own); SlowStart lets it
// double each round trip again from where it is (the breaker closed: it
// fell on an outage, not on the engine's capacity).
//
// A Limiter is safe for concurrent use; Acquire blocks until a slot is free
// or its context ends.
package limit
