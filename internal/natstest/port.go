package natstest

import (
	"net"
	"strconv"
	"testing"
)

// FreePort returns a loopback port the OS just chose and nothing listens
// on now, for a server a test starts later or restarts where its clients
// expect it. Another process may take it in between: a server the test can
// start at once should listen on port 0 instead (Run, RunRestartable).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	return port
}

// FreeAddr is FreePort as a host:port on 127.0.0.1.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}
