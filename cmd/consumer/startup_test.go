package main_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

// readyz polls /readyz until it answers and returns its status and body.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	var code int
	var body string
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		code, body = get(t, "http://"+addr+"/readyz")
		return true
	}, 10*time.Second, 10*time.Millisecond, "/readyz never answered")
	return code, body
}

func serverOn(t *testing.T, addr string, change func(*server.Options)) *server.Server {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	o := natstest.Options(t.TempDir())
	o.Host, o.Port = host, must(strconv.Atoi(port))
	if change != nil {
		change(o)
	}
	return natstest.Start(t, o)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A NATS outage at boot is not a crash: the process waits, /healthz
// answers, /readyz says why, and it consumes the moment NATS is there.
func TestANATSOutageAtBootIsWaitedOut(t *testing.T) {
	t.Parallel()
	natsAddr, httpAt := natstest.FreeAddr(t), natstest.FreeAddr(t)
	p := start(t, "--nats-url", "nats://"+natsAddr, "--create-streams", "--http-addr", httpAt,
		"--downstream-url", "http://127.0.0.1:1/reads", "--nats-connect-retry-max", "1s")
	readyz(t, httpAt)
	// /readyz answers "starting" until the first connection attempt: wait
	// for it to say why it is not ready (the first answer raced the
	// attempt once in CI).
	var code int
	require.Eventually(t, func() bool {
		var body string
		code, body = get(t, "http://"+httpAt+"/readyz")
		return strings.Contains(body, "connecting to NATS at nats://"+natsAddr)
	}, 10*time.Second, 10*time.Millisecond, "/readyz never said it was connecting to NATS")
	assert.Equal(t, 503, code)
	healthz, _ := get(t, "http://"+httpAt+"/healthz")
	assert.Equal(t, 200, healthz, "alive while it waits")
	require.Eventually(t, func() bool { return p.Count("connecting to NATS") >= 2 }, 10*time.Second, 10*time.Millisecond)

	serverOn(t, natsAddr, nil)
	require.Eventually(t, func() bool { c, _ := get(t, "http://"+httpAt+"/readyz"); return c == 200 },
		20*time.Second, 20*time.Millisecond, "ready once NATS is up")
	assert.Equal(t, 0, stop(p, 30*time.Second))
}

// SIGTERM while it waits for NATS is a clean stop.
func TestStoppedWhileConnectingExitsZero(t *testing.T) {
	t.Parallel()
	httpAt := natstest.FreeAddr(t)
	p := start(t, "--nats-url", "nats://"+natstest.FreeAddr(t), "--http-addr", httpAt, "--downstream-url", "http://127.0.0.1:1/reads")
	readyz(t, httpAt)
	assert.Equal(t, 0, stop(p, 10*time.Second))
	assert.NotNil(t, p.First("stopped before connecting to NATS"))
}

// A missing stream is waited for too, /readyz naming it and the fix.
func TestAMissingStreamIsWaitedFor(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	httpAt := natstest.FreeAddr(t)
	p := start(t, "--nats-url", s.ClientURL(), "--http-addr", httpAt, "--downstream-url", "http://127.0.0.1:1/reads",
		"--nats-connect-retry-max", "1s")
	require.Eventually(t, func() bool {
		c, b := readyz(t, httpAt)
		return c == 503 && strings.Contains(b, "stream missing: METER_READS") && strings.Contains(b, "--create-streams")
	}, 10*time.Second, 20*time.Millisecond)
	// /readyz may say so before the line is read from the process's output.
	require.Eventually(t, func() bool { return p.First("waiting for the streams") != nil }, 10*time.Second, 20*time.Millisecond)
	assert.False(t, p.Exited())
	assert.Equal(t, 0, stop(p, 10*time.Second))
}

// A wrong password is not a blip: it is said at once, by name, in the log
// and on /readyz; the process keeps trying at the longest delay, unready
// (the documented policy), and never shows the secret.
func TestAWrongPasswordIsSaidAtOnce(t *testing.T) {
	t.Parallel()
	natsAddr := natstest.FreeAddr(t)
	serverOn(t, natsAddr, func(o *server.Options) { o.Username, o.Password = "meter", "right-password" })
	httpAt := natstest.FreeAddr(t)
	p := proctest.Start(t, "consumer", binary, []string{"HOME=" + t.TempDir(), "NATS_PASSWORD=wrong-password-hunter2"},
		"--log-format", "json", "--nats-url", "nats://"+natsAddr, "--nats-user", "meter", "--http-addr", httpAt,
		"--downstream-url", "http://127.0.0.1:1/reads", "--nats-connect-retry-max", "2s")
	require.Eventually(t, func() bool {
		c, b := readyz(t, httpAt)
		return c == 503 && strings.Contains(b, "NATS refused the connection") && strings.Contains(b, "Authorization Violation")
	}, 10*time.Second, 20*time.Millisecond)
	// /readyz may say so before the line is read from the process's output.
	var refusal map[string]any
	require.Eventually(t, func() bool {
		for _, l := range p.Records("connecting to NATS") { // a slow machine may time out an attempt first
			if l["level"] == "ERROR" {
				refusal = l
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "a refusal is logged as an error")
	assert.Contains(t, refusal["error"], "NATS refused the connection")
	assert.Equal(t, "2s", refusal["retry_in"], "a refusal is retried at the longest delay")
	assert.NotContains(t, p.Output(), "hunter2")
	assert.Equal(t, 0, stop(p, 10*time.Second))
}
