package main_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	consumer "github.com/meterline/meter-consumer/cmd/consumer"
	"github.com/meterline/meter-consumer/config"
)

// "consumer config" prints the effective configuration, secrets redacted,
// as a file the service reads back; an invalid one is refused with the
// field named.
func TestConfigPrintsTheEffectiveConfiguration(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(file, []byte("retry:\n  cap: 2m\nconsumer:\n  concurrency: 8\n"), 0o600))
	args := []string{"--config", file, "--concurrency", "16", "--downstream-url", "https://rater:pw-secret@engine.example/reads"}
	out, errOut, code := runTool(t, append([]string{"config"}, args...)...)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.NotContains(t, out, "pw-secret")
	assert.Contains(t, out, "  url: https://rater:REDACTED@engine.example/reads\n")
	assert.Contains(t, out, "  cap: 2m\n", "from the file")
	assert.Contains(t, out, "  concurrency: 16\n", "the flag over the file")

	want, err := config.Load(args, nil)
	require.NoError(t, err)
	printed := filepath.Join(t.TempDir(), "printed.yaml")
	require.NoError(t, os.WriteFile(printed, []byte(out), 0o600))
	got, err := config.Load([]string{"--config", printed}, nil)
	require.NoError(t, err)
	assert.Equal(t, want.Redacted(), got, "what it prints is what the service would run with")

	out, errOut, code = runTool(t, "config", "--downstream-url", "https://engine.example/reads", "--concurrency", "0")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "consumer config: invalid configuration")
	assert.Contains(t, errOut, "consumer.concurrency (0)")
}

// A CONSUMER_ variable that is no setting (a misspelling) is ignored with a
// warning naming the setting it is closest to; it refuses nothing, since the
// platform may set such names (Kubernetes service links). Not parallel: it
// replaces the environment the names are checked in.
func TestAnUnknownEnvironmentVariableIsWarnedOf(t *testing.T) {
	consumer.SetEnviron(t, []string{"CONSUMER_CONCURENCY=5", "CONSUMER_PORT=tcp://10.0.0.1:80", "PATH=/usr/bin"})
	out, errOut, code := runTool(t, "config", "--downstream-url", "https://engine.example/reads")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  concurrency: 32\n", "the misspelt variable is not read")
	assert.Equal(t, "consumer config: warning: CONSUMER_CONCURENCY is no setting: ignored (did you mean CONSUMER_CONCURRENCY?)\n"+
		"consumer config: warning: CONSUMER_PORT is no setting: ignored\n", errOut)
}

// What "consumer config" prints reads back with one setting changed: the
// settings derived from others are left out (named in a comment), so they
// are derived again instead of holding against the change.
func TestConfigPrintsAFileThatTakesAChange(t *testing.T) {
	t.Parallel()
	out, errOut, code := runTool(t, "config", "--downstream-url", "https://engine.example/reads")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# consumer.handler_timeout: 6s\n")
	assert.NotContains(t, out, "  handler_timeout:")
	printed := filepath.Join(t.TempDir(), "printed.yaml")
	require.NoError(t, os.WriteFile(printed, []byte(out), 0o600))
	cfg, err := config.Load([]string{"--config", printed, "--ack-wait", "5s"}, nil)
	require.NoError(t, err, "a shorter ack wait given beside the printed file")
	assert.Equal(t, 4*time.Second, cfg.Consumer.HandlerTimeout, "derived again: 4/5 of the ack wait")
}
