// Package simengine is a simulated billing rate engine: the demo's (it ships
// in the product binary behind --demo), the tests' and the bench's. It is an
// http.Handler ([Engine]) that bills posted reads by their idempotency key,
// and [NewServer] serves it on loopback, as net/http/httptest serves a
// handler.
//
// # A capacity
//
// An engine has Servers that each serve one call for a ServiceTime (drawn
// around its mean when Jitter is set), so it serves [Engine.Capacity] =
// Servers / ServiceTime calls a second when busy. A call that finds every
// server busy waits in a first-in-first-out Queue; its wait is in its latency,
// since it is answered only once served. A call that finds the queue full too
// is shed: answered at once 503, or 429 for a share of them, with a
// Retry-After for a share of them ([Shedding]). The zero [Options] have
// unlimited servers and no service time: every call is answered 200 at once.
//
// A client that gives up while its call waits takes it out of the queue: it
// is never served ([Left]). One that gives up while its call is being served
// leaves the server busy until the service time ends ([Abandoned]). Neither
// is billed, and neither gets an implicit 200: whoever still reads the answer
// gets 503.
//
// # Scripting
//
// A scenario changes the servers, the queue, the service time and the
// shedding at run time ([Engine.SetServers] and the other setters), and can
// script each call by its key and its number n among the calls of that key:
// [Options.Answer] gives the status and headers of a served call (consulted
// just before it is billed), [Options.Delay] adds a latency to it, and
// [Options.Check] sees every valid request and its body and may refuse it
// with 400 ([CheckJSON] wants a JSON body, as the real API does).
//
// [Options.Refuse] answers a read's own failure at once, as a real engine
// answers a 503 for one tariff whose service is down or a 429 for one
// account over its quota: before any rating work. It is consulted as a call
// arrives, once the ledger has counted it and before it is admitted; a
// status it returns is answered at once, and the call is [Rejected]: never
// queued nor served, it takes no server, so a busy engine refuses at once
// too. Refuse may only refuse (a status outside 400-599 is answered 500);
// 0 lets the call go on to the servers, the queue and Answer. A failure
// scripted with Answer instead is answered after the call's wait and
// service, as an engine that fails a read only once it has rated it.
//
// # What it records
//
// Per key, every call in the order it arrived ([Engine.Calls],
// [Engine.Ledger]): when, what became of it ([Outcome]), the status answered,
// its wait and its latency. A 2xx for a key already billed is a [Duplicate],
// not a second bill; a ledger checks that every read was billed exactly once
// with [Engine.Ledger] or [Stats]. Totals and the state now ([Engine.Stats]):
// calls, served, billed, duplicates, shed by status, rejected, in the system
// now and at most; every call ends served, shed, rejected, left or
// abandoned. The latency of every served call ([Engine.Latencies], with
// [Latencies.Quantile]), and the calls arrived per 100ms ([Engine.Arrivals],
// [Engine.PeakArrivals] for a herd). [Engine.Await] waits for a condition on
// the Stats without polling. [Options.Keep] limits the per-key ledger, so a
// bench of millions of reads keeps its memory flat. [Options.Record] keeps
// each call's request headers and body too ([Call].Header and Body), so that
// a test sees what reached the engine without a handler of its own.
//
// # Determinism
//
// Every draw (shedding's status and Retry-After, the service time's jitter)
// comes from sources seeded from [Options.Rand], one per purpose, so a given
// seed gives the same sequence of shedding answers whatever the jitter draws
// interleaved with them. Time is the real clock: it is an HTTP server.
//
// # Errors and concurrency
//
// [New] and the setters return an error wrapping [ErrInvalid] that names each
// field at fault. An [Engine] is safe for concurrent requests and for calling
// any method from any goroutine; Answer, Refuse, Delay, Check and Keep are
// called from many goroutines at once, without the engine's lock (they may
// call [Engine.Billed]). Its state is guarded by one mutex, taken three times
// per served call for a few hundred nanoseconds (once more when Refuse is
// set: the lock is let go while it is consulted), twice per rejected call. The engine starts no goroutine of its
// own except a timer that frees the server of an abandoned call; a [Server]
// stops its goroutines at [Server.Close].
package simengine
