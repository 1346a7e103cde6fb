package reliability_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/proctest"
)

// baseFlags are the flags every scenario starts from: debug logs so a test
// can count what each process did, no HTTP server, and one replica (the
// test servers are single nodes: a cluster scenario gives --replicas 3 after
// these). Neither they nor fast are ever changed: the tests run in parallel.
var baseFlags = []string{"--log-format", "json", "--log-level", "debug", "--http-addr", "", "--replicas", "1"}

// fast are baseFlags with short delays, so a test runs in seconds.
var fast = slices.Concat(baseFlags, []string{
	"--retry-base", "50ms", "--retry-cap", "400ms", "--max-attempts", "6",
	"--ack-wait", "3s", "--handler-timeout", "2s", "--downstream-timeout", "1500ms",
	"--shutdown-timeout", "5s",
})

// startConsumerEnv starts a consumer with the fast flags, args and extra
// environment variables, and waits until it consumes.
func startConsumerEnv(t *testing.T, name string, env []string, args ...string) *proctest.Proc {
	t.Helper()
	return startProc(t, name, fast, env, args)
}

// startProc starts a consumer with the flags base, then args, and waits
// until it consumes.
func startProc(t *testing.T, name string, base, env, args []string) *proctest.Proc {
	t.Helper()
	return startProcOf(t, binary, name, base, env, args)
}

// startProcOf is startProc with the consumer binary bin.
func startProcOf(t *testing.T, bin, name string, base, env, args []string) *proctest.Proc {
	t.Helper()
	p := proctest.Start(t, name, bin, env, slices.Concat(base, args)...)
	require.Eventually(t, func() bool { return p.Count("consuming") > 0 || p.Exited() }, 30*time.Second, 10*time.Millisecond)
	require.False(t, p.Exited(), "%s exited at start:\n%s", name, p.Output())
	return p
}
