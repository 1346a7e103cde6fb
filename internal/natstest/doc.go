// Package natstest starts real NATS servers with JetStream inside the test
// process, the way net/http/httptest starts HTTP servers: ports chosen by
// the OS, storage in the test's temporary directory, everything shut down by
// t.Cleanup. It is imported by tests only.
package natstest
