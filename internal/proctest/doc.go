// Package proctest runs the consumer binary as a subprocess for tests: it
// builds the binary once, starts it with JSON logs, keeps every log record,
// and stops it with SIGTERM or SIGKILL. It is imported by tests only.
package proctest
