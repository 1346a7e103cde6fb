// Package service wires the running consumer together from a validated
// config.Config: the NATS connection (or an embedded server when no URL is
// configured), the streams and the durable consumer, the HTTP sink, the
// pipeline of package stream, and the HTTP endpoints /metrics, /healthz and
// /readyz. With Demo set it also starts the simulators of package demo (the
// rate engine's phase gauge on the service's registry), and with
// DemoIncidents the rate engine's incidents on demo.DefaultSchedule.
//
// Run starts the HTTP server first, so that /healthz answers and /readyz
// says why the service is not ready while it waits: connecting to NATS
// (retried with a full-jittered, growing delay up to nats.connect_retry_max;
// refused credentials are said by name and retried at the longest delay),
// then the streams, the records bucket and the durable (waited for while
// missing). It returns at once only for what waiting cannot mend: a durable
// the service cannot run on. A context that ends before it consumes is a
// clean stop. Once consuming, it blocks until its context ends, then shuts
// everything down in order: stop pulling and settle in-flight reads, drain
// the connection, stop the embedded server, stop the HTTP server, within
// [MaxStop] of its context's end (the embedded server's stop aside). It
// logs a short start-up line (the version of [Deps], NATS, the stream, the
// durable, the engine) and the whole configuration at debug. It is what
// cmd/consumer runs, and what tests start in-process.
//
// From the moment Run starts, meter_consumer_consuming says whether the
// replica consumes and meter_consumer_not_consuming{reason} why not, one of
// Reasons (the readiness /readyz serves, as a bounded label), and
// meter_consumer_nats_connection_events_total counts disconnections and
// reconnections. Every series Run registers (the pipeline's, the backlog
// gauges, these) carries the labels stream and durable, the configuration's
// stream.name and consumer.durable, so that the fleets of several
// partitions in one namespace are told apart.
package service
