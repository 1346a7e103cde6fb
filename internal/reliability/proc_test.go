package reliability_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/proctest"
)

// fast are the flags every scenario starts from: short delays so a test
// runs in seconds, debug logs so a test can count what each process did,
// and one replica (the test servers are single nodes: a cluster scenario
// gives --replicas 3 after these).
var fast = []string{
	"--log-format", "json", "--log-level", "debug", "--http-addr", "", "--replicas", "1",
	"--retry-base", "50ms", "--retry-cap", "400ms", "--max-attempts", "6",
	"--ack-wait", "3s", "--handler-timeout", "2s", "--downstream-timeout", "1500ms",
	"--shutdown-timeout", "5s",
}

func startConsumer(t *testing.T, name string, args ...string) *proctest.Proc {
	t.Helper()
	return startConsumerEnv(t, name, nil, args...)
}

// startConsumerEnv starts a consumer with extra environment variables and
// waits until it consumes.
func startConsumerEnv(t *testing.T, name string, env []string, args ...string) *proctest.Proc {
	t.Helper()
	p := proctest.Start(t, name, binary, env, append(append([]string{}, fast...), args...)...)
	require.Eventually(t, func() bool { return p.Count("consuming") > 0 || p.Exited() }, 30*time.Second, 10*time.Millisecond)
	require.False(t, p.Exited(), "%s exited at start:\n%s", name, p.Output())
	return p
}
