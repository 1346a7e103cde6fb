// Package bench measures the consumer against bare baselines run in the same
// process, in the same run, and reports ratios: the machine it runs on is
// small, shared and noisy, so an absolute figure says little and a ratio to
// a baseline measured a moment before says much more.
//
// Every scenario but process starts from an in-process NATS server with
// JetStream (storing in a temporary directory) and meter reads published to
// it:
//
//   - overhead: the full pipeline (stream.New + Run, a no-op sink, real
//     metrics and a JSON logger) against a bare jetstream Consume loop that
//     only acks, at several pull sizes;
//   - http: the pipeline with the real HTTP sink and the production options
//     (the adaptive limit and the retry budget on, the breaker on) against a
//     bare Go HTTP client posting the same bodies to the same loopback
//     server, with the limit off beside it;
//   - storm: reads that all fail once at the same time, redelivered with full
//     jitter or with a fixed delay (NakWithDelay), and how peaky the
//     redeliveries are;
//   - steady: a steady 20% transient failure rate, held in process or NAKed
//     with NakWithDelay, and the spread and lateness of the redeliveries;
//   - memory: the consumer binary as a child process draining a large
//     backlog (VmHWM), and the in-process heap of the pipeline and the bare
//     loop;
//   - scaling: 1, 2 and 4 consumer instances on one durable, with the CPU
//     split between the server and the clients;
//   - capacity: fleets of 1, 4 and 16 replicas (independent pipelines on one
//     durable) draining a backlog against an simengine rate engine with a
//     capacity, with the adaptive limit and the retry budget as the binary
//     builds them, and with 32 calls at once per replica as before them;
//   - cycle-open: the same fleets started at one instant, as when a billing
//     cycle opens, and their first seconds;
//   - retry-budget: one replica draining a backlog of which a fifth fails
//     once, with the retry budget on and off: how long the retries it
//     holds take, and the MaxAckPending room they hold;
//   - partial: one replica with the production options against a bare HTTP
//     client of the same concurrency, draining a backlog against an engine
//     of ample capacity whose latency spreads (uniform in 5-25ms, or long
//     tailed), with healthy reads only and with reads that fail once (503,
//     or 429 with Retry-After), or always: the healthy reads' goodput, the
//     retries' lateness, the attempts of the always-failing reads and the
//     adaptive limit;
//   - outage: fleets of 1 and 4 replicas draining a backlog from an engine
//     down for a while, then back;
//   - engines: the engine matrix of issue 39, run once per retry policy (the
//     production one, and short delays): the capacity engine (fleets of
//     Replicas), healthy engines (uniform 5-25ms, and a long tail of 5ms
//     with one call in ten at 80ms), the partial mix with its failures
//     answered at once (simengine's Refuse) or after the service time, as a
//     backlog and as a trickle of 10 reads/s, the partial mix switched at
//     once to the long tail, one account throttled (429, Retry-After: 60),
//     40% of all calls failed at random whatever the load, a replica
//     joining an engine kept full by four other clients, and an engine down
//     for 10s; each cell drained by the production pipeline (startFleet,
//     productionOptions), after the partial scenario's bare client on the
//     same backlog and engine shape where its target is a share of the
//     bare client's goodput, and judged against its target;
//   - process: the consumer binary and a bare consumer (Consume with a pull
//     of 500, 32 workers POSTing each body with its key, Ack), each run as
//     a process of its own, alternately, against a nats-server process (not
//     the in-process one) and one loopback engine: reads/s, and per read the
//     process CPU, allocations, GC cycles and read/write syscalls from
//     /proc and the runtime's counters.
//
// Run returns a Report; WriteTable prints it; cmd/consumer-bench is the
// command. Every random source that can be is seeded from Config.Seed. The
// bench asserts nothing: it measures. Goroutines started here end with the
// scenario that started them.
package bench
