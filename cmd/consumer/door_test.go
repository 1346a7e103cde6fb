package main_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

const doorSecret = "door-5ecret-0xC0FFEE"

// An unreadable token file or TLS file is a configuration error, named by
// its field, before anything connects; no secret is printed.
func TestUnreadableDownstreamFilesStopStartUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	badToken := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(badToken, []byte(doorSecret+"\n"+doorSecret), 0o600))
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"missing token file", []string{"--downstream-token-file", missing}, []string{"downstream.token_file", "no such file"}},
		{"token with a new line inside", []string{"--downstream-token-file", badToken}, []string{"downstream.token_file", "a character a header value cannot carry"}},
		{"missing CA", []string{"--downstream-ca", missing}, []string{"downstream.tls.ca"}},
		{"certificate without key", []string{"--downstream-cert", missing}, []string{"downstream.tls.cert", "downstream.tls.key is empty"}},
		{"a header the sink sets", []string{"--downstream-headers", "Content-Type: text/plain"}, []string{`downstream.headers["Content-Type"]`}},
		{"a header without a colon", []string{"--downstream-headers", "X-Api-Key " + doorSecret}, []string{"flag -downstream-headers", `want "Name: value"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--nats-url", "nats://127.0.0.1:1", "--downstream-url", "https://127.0.0.1:1/reads"}, tt.args...)
			out, errOut, code := runTool(t, args...)
			assert.Equal(t, 2, code, errOut)
			assert.Empty(t, out)
			for _, w := range tt.want {
				assert.Contains(t, refusal(t, errOut), w)
			}
			if tt.name != "a header without a colon" { // the flag package quotes a bad flag value, as ps shows it
				assert.NotContains(t, errOut, "5ecret")
			}
		})
	}
}

// A running consumer with a token file and a credential-like header logs
// neither, at debug, from start to stop.
func TestBinaryNeverLogsDownstreamSecrets(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	down := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer down.Close()
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte(doorSecret), 0o600))

	p := proctest.Start(t, "consumer", binary, []string{"HOME=" + t.TempDir(), "CONSUMER_DOWNSTREAM_HEADERS=X-Tenant: north\nX-Api-Key: api-" + doorSecret},
		"--log-format", "json", "--log-level", "debug", "--nats-url", s.ClientURL(), "--create-streams", "--replicas", "1", "--downstream-url", down.URL, "--http-addr", "",
		"--downstream-token-file", token)
	httpAddr(t, p)
	_, err := js.Publish(t.Context(), "meter.reads.north", []byte(`{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`))
	require.NoError(t, err)
	cons, err := js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.AckFloor.Stream == 1
	}, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, 0, stop(p, 15*time.Second))

	out := p.Output()
	assert.NotContains(t, out, "5ecret")
	configured := p.First("configuration")
	require.NotNil(t, configured)
	d := configured["config"].(map[string]any)["downstream"].(map[string]any)
	assert.Equal(t, token, d["token_file"], "the path is shown")
	assert.Equal(t, map[string]any{"X-Tenant": "north", "X-Api-Key": "REDACTED"}, d["headers"])
	assert.True(t, strings.Contains(out, `"reload_interval":"10s"`))
}
