// Package service wires the running consumer together from a validated
// config.Config: the NATS connection (or an embedded server when no URL is
// configured), the streams and the durable consumer, the HTTP sink, the
// pipeline of package stream, and the HTTP endpoints /metrics, /healthz and
// /readyz. With Demo set it also starts the simulators of package demo.
//
// Run blocks until its context ends, then shuts everything down in order:
// stop pulling and settle in-flight reads, drain the connection, stop the
// HTTP server, stop the embedded server. It is what cmd/consumer runs, and
// what tests start in-process.
package service
