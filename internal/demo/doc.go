// Package demo owns the two simulators that let `consumer --demo` run the
// whole product on one machine: a head-end that publishes meter reads to
// JetStream, and a billing rate engine that the consumer posts reads to.
//
// # Head-end
//
// HeadEnd publishes one read per tick, at Rate reads per second, to
// "<Subject>.<region>" (north, south, east or west; a meter always reports to
// the same region). Each meter's quantity is a register that only grows, with
// three decimals, built as a string and never as a float. InvalidPercent of
// the reads are deliberately malformed; they cycle through a fixed list of
// faults (a timestamp without a zone, an exponent out of range, a unit in the
// wrong case, a body that is not an object, a meter_id outside the allowed
// characters, truncated JSON, a missing field) and carry a "Demo-Invalid"
// header naming the fault. Every read is published under its own Nats-Msg-Id,
// which is also its idempotency_key, so a retried publish is de-duplicated
// by JetStream and a redelivered read is billed once. Given the same Rand
// seed and clock, the head-end publishes the same sequence of messages.
//
// # Rate engine
//
// RateEngine is an http.Handler built on simengine.Engine, so it has a
// capacity like a real one: Servers calls served in parallel, each for about
// ServiceTime, Queue more waiting for a server (the wait is in their
// latency), and the rest shed at once with 503, or 429 for a share, some with
// Retry-After (by default 8 servers of 40ms and a queue of 16: 200 reads a
// second, ten times the head-end's rate; publish faster, or drain a backlog
// at full concurrency, and it sheds). It answers 400 to anything but a POST
// of valid JSON with Content-Type application/json and an Idempotency-Key
// header. Each call draws an outcome from the seed, the key and the call's
// number: 503, 429 with Retry-After, or 422 are the read's own failures,
// answered at once on arrival, before any work, as a real engine answers
// them (they take no server and no queue place); otherwise the call is
// served: 200 (billed), or a slow 200 (slow on the way back: it holds no
// server). A served call for a key already billed answers 200 again
// without billing twice. StartRateEngine serves it on
// "/reads" until its context ends, then shuts down gracefully; it logs the
// capacity at the start and a warning for every 10s in which calls were shed.
// The engine remembers every call for its lifetime, which is fine for a demo.
// A call's outcome is a fact about its read (its key and the call's
// number), never about the load: the load shows only through the capacity,
// in the wait in the queue and the calls shed past it.
//
// # Incidents
//
// A RateEngine is in one Phase at a time: PhaseNormal (its own capacity),
// PhaseOverload (the capacity of RateEngineOptions.Overload, by default 1
// server of 100ms and a queue of 4: 10 reads a second, half the head-end's
// rate, so that calls queue and are shed with 503 and 429) or PhaseOutage
// (every call answered 503 at once, outside the engine: nothing billed,
// nothing in the ledger). SetPhase changes it; Incidents changes it on a
// Schedule (DefaultSchedule: 60s normal, 30s overload, 60s normal, 20s
// outage, repeated), logging each change once: "demo: rate engine
// overloaded..." and "demo: rate engine down..." at warn, "demo: rate
// engine recovered" at info. Its clock and its sleep are fields, so a test
// runs the schedule without waiting. Metrics exports the phase as
// meter_consumer_demo_rate_engine_phase{phase}.
//
// # Errors
//
// Misconfiguration (NewRateEngine, HeadEnd.Run, Incidents.Run, an unknown
// phase given to SetPhase) returns an error wrapping ErrConfig. Incidents.Run
// returns nil once its context ends. HeadEnd.Run returns nil once its context ends and the publish in
// flight, if any, is acknowledged or timed out; a failed publish is logged and
// counted (HeadEnd.Failed), never fatal. StartRateEngine
// returns listen errors; its wait function returns serve and shutdown errors.
//
// # Concurrency
//
// A HeadEnd runs one Run at a time (a second concurrent Run is refused) and
// is the only user of its Rand while running; Published and Failed are safe
// to call from any goroutine. RateEngine is safe for concurrent requests and
// its methods for any goroutine (SetPhase included); NewRateEngine takes its
// draws from its Rand and keeps it no longer. One Incidents.Run at a time
// should drive an engine. Every goroutine the package starts stops when its
// context ends and is waited for.
package demo
