// Package proctest runs the consumer binary as a subprocess for tests: it
// builds the binary once, starts it with JSON logs, keeps every log record,
// and stops it with SIGTERM or SIGKILL. GoBuild, the one way the module's
// binaries are built, is also the bench's (consumer-bench, a tool of its
// own); the product imports nothing of it.
package proctest
