// Package bench measures the consumer against bare baselines run in the same
// process, in the same run, and reports ratios: the machine it runs on is
// small, shared and noisy, so an absolute figure says little and a ratio to
// a baseline measured a moment before says much more.
//
// Every scenario but process starts from an in-process NATS server with
// JetStream (storing in a temporary directory) and meter reads published to
// it:
//
//   - overhead: the pipeline as the binary builds it (service.Pipeline,
//     without the breaker, the adaptive limit, the retry budget and the
//     records; a no-op sink, real metrics and a JSON logger) against a bare
//     jetstream Consume loop that only acks, at several pull sizes;
//   - storm: reads that all fail once at the same time, redelivered with full
//     jitter or with a fixed delay (NakWithDelay), and how peaky the
//     redeliveries are;
//   - steady: a steady 20% transient failure rate, held in process or NAKed
//     with NakWithDelay, and the spread and lateness of the redeliveries;
//   - engines: the engine matrix of issue 39, run once per retry policy (the
//     production one, and short delays): the capacity engine (fleets of
//     Replicas), healthy engines (uniform 5-25ms, and a long tail of 5ms
//     with one call in ten at 80ms), the partial mix with its failures
//     answered at once (simengine's Refuse) or after the service time, as a
//     backlog and as a trickle of 10 reads/s, the partial mix switched at
//     once to the long tail, one account throttled (429, Retry-After: 60),
//     40% of all calls failed at random whatever the load, a replica
//     joining an engine kept full by four other clients, and an engine down
//     for 10s; each cell drained by the production pipeline (startFleet:
//     service.Pipeline of config.Default()), after the bare client on the
//     same backlog and engine shape where its target is a share of the bare
//     client's goodput, and judged against its target;
//   - process: the consumer binary and a bare consumer (Consume with a pull
//     of 500, 32 workers POSTing each body with its key, Ack), each run as
//     a process of its own, alternately, against a nats-server process (not
//     the in-process one) and one loopback engine: reads/s, and per read the
//     process CPU, allocations, GC cycles and read/write syscalls from
//     /proc and the runtime's counters, and the binary's peak resident set.
//
// What the fault suite (internal/reliability) checks, outages and the retry
// budget, and what internal/audit's tests check, is not measured here.
//
// The baselines in process are one bare client (bareRetrier: the product's
// HTTP sink, 32 goroutines, no limit, budget or breaker), which holds its
// retries (the matrix's) or NAKs them with their delay (the storm's and
// the steady's), and the overhead's Consume loops (bare, fan-out, fan-out
// decoding). Every variant of the matrix and the steady drains through
// env.drive; the overhead's and the storm's through env.drain, which
// measures the process CPU.
//
// Every consumer of ours the bench runs is built by service.Pipeline, the
// binary's own wiring, from a configuration (see product); the overhead's,
// the storm's and the steady's run without the breaker (but the overhead's
// +breaker row), the adaptive limit, the retry budget and the records
// (isolatedConfig), as the runs before those were added did.
//
// Run returns a Report; WriteTable prints it; cmd/consumer-bench is the
// command. Every random source that can be is seeded from Config.Seed. The
// bench asserts nothing: it measures. Goroutines started here end with the
// scenario that started them.
package bench
