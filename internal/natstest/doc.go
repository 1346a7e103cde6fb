// Package natstest starts real NATS servers with JetStream inside the test
// process, the way net/http/httptest starts HTTP servers: ports chosen by
// the OS, storage in the test's temporary directory, everything shut down by
// t.Cleanup. RunRestartable's server can be shut down and started again on
// the same port and store; FreePort and FreeAddr find a loopback port for
// whatever a test must start later where something already points.
//
// It is imported by tests and by the bench, never by the product binary
// (cmd/consumer). Its helpers are called from the test's goroutine.
package natstest
