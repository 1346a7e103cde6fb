package natstest

import (
	"fmt"
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
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	p, _ := strconv.Atoi(port)
	return p
}

// FreeAddr is FreePort as a host:port on 127.0.0.1.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := Free()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return addr
}

// Free is FreeAddr for a caller that is not a test (the bench): the
// address, or why there is none.
func Free() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	return addr, nil
}
