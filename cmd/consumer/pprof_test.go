package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// --pprof-addr serves the profiles on a server of its own: the metrics
// server never serves them, and without the setting nothing listens.
func TestPprofIsServedApartFromTheMetrics(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--http-addr", "127.0.0.1:0",
		"--pprof-addr", "127.0.0.1:0", "--downstream-url", "http://127.0.0.1:1/reads")
	metrics := httpAddr(t, p)
	l := p.First("profiling server listening: for diagnostics, not for a production pod's every day")
	require.NotNil(t, l)
	pprofAddr, _ := l["pprof"].(string)
	require.NotEmpty(t, pprofAddr)

	code, body := get(t, "http://"+pprofAddr+"/debug/pprof/")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "goroutine")
	code, body = get(t, "http://"+pprofAddr+"/debug/pprof/heap?debug=1")
	assert.Equal(t, 200, code)
	assert.True(t, strings.HasPrefix(body, "heap profile"), "a heap profile: %.40s", body)
	code, _ = get(t, "http://"+metrics+"/debug/pprof/")
	assert.Equal(t, 404, code, "the metrics server serves no profile")
	assert.Equal(t, 0, stop(p, 15*time.Second))

	p = start(t, "--nats-url", s.ClientURL(), "--http-addr", "127.0.0.1:0", "--downstream-url", "http://127.0.0.1:1/reads")
	httpAddr(t, p)
	assert.Nil(t, p.First("profiling server listening: for diagnostics, not for a production pod's every day"), "off by default")
	assert.Equal(t, 0, stop(p, 15*time.Second))
}

// A pprof address on the metrics port stops start-up naming both settings.
func TestPprofOnTheMetricsPortIsRefused(t *testing.T) {
	t.Parallel()
	p := start(t, "--http-addr", "127.0.0.1:18080", "--pprof-addr", ":18080", "--downstream-url", "http://127.0.0.1:1/reads")
	require.Eventually(t, p.Exited, 10*time.Second, 10*time.Millisecond)
	l := p.First("configuration refused; not starting")
	require.NotNil(t, l)
	assert.Contains(t, l["error"], `http.pprof_addr (":18080") must not share http.addr's port ("127.0.0.1:18080")`)
}
