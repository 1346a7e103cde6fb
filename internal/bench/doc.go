// Package bench measures the consumer against bare baselines run in the same
// process and the same run, and reports ratios: the machine is small, shared
// and noisy, so a ratio to a baseline measured a moment before says much more
// than an absolute figure.
//
// The scenarios, all but process on an in-process NATS server with JetStream:
//
//   - overhead: the pipeline with a no-op sink against a bare Consume loop
//     that only acks (and, as a diagnostic, that loop fanned out to 32
//     goroutines that decode each read before the ack), at several pulls;
//   - storm: reads that all fail once at the same time, redelivered with full
//     jitter or with a fixed delay, and how peaky the redeliveries are;
//   - steady: a steady 20% transient failure rate, held in process or NAKed
//     with NakWithDelay, and the spread and lateness of the redeliveries;
//   - engines: the engine matrix of issue 39, once per retry policy: fleets of
//     the production pipeline draining rate engines of many shapes, each cell
//     after the bare client and against its target;
//   - process: the consumer binary and a bare consumer, each a process of its
//     own, against a nats-server process: reads/s, and per read CPU,
//     allocations and GC cycles.
//
// One bare client (bare: a Consume loop with none of the pipeline's controls)
// is every baseline: acking each read, or decoding it first, for the
// overhead; posting it with the product's HTTP sink from 32 goroutines, and
// retrying it, for the storm, the steady, the matrix and the process
// scenario.
// Every consumer of ours is built by service.Pipeline, the binary's own
// wiring (see product); the overhead's, the storm's and the steady's run
// without the breaker (but in the overhead's +breaker row), the adaptive
// limit, the retry budget and the records (isolatedConfig), as the runs
// before those were added did.
//
// Run returns a Report; WriteTable prints it; cmd/consumer-bench is the
// command. Random sources are seeded from Config.Seed where they can be. The
// bench asserts nothing, it measures; goroutines started here end with the
// scenario that started them.
package bench
