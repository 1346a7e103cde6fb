package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusal returns the reason a refused configuration is given for: the
// error of the JSON record the binary writes when its lines are JSON, the
// output itself otherwise.
func refusal(t *testing.T, out string) string {
	t.Helper()
	var rec map[string]any
	if json.Unmarshal([]byte(strings.TrimSpace(out)), &rec) != nil {
		return out
	}
	assert.Equal(t, "configuration refused; not starting", rec["msg"])
	why, _ := rec["error"].(string)
	return why
}

// A refused configuration is written in the format of the process's lines:
// one JSON record under JSON (the flag, the environment, the file, or auto
// off a terminal), the plain message under text.
func TestARefusedConfigurationIsWrittenInTheLogFormat(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(file, []byte("log:\n  format: json\n"), 0o600))
	bad := []string{"--nats-url", "nats://127.0.0.1:1", "--downstream-url", "http://127.0.0.1:1/reads", "--retry-base", "1s", "--retry-cap", "100ms"}
	const want = "retry.cap (100ms) must be >= retry.base (1s)"
	tests := []struct {
		name     string
		args     []string
		wantJSON bool
	}{
		{"--log-format json", append([]string{"--log-format", "json"}, bad...), true},
		{"--log-format=json", append([]string{"--log-format=json"}, bad...), true},
		{"log.format json in the file", append([]string{"--config", file}, bad...), true},
		{"auto off a terminal", bad, true},
		{"--log-format text", append([]string{"--log-format", "text"}, bad...), false},
		{"the flag wins over the file", append([]string{"--config", file, "--log-format", "text"}, bad...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runTool(t, tt.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			var rec map[string]any
			err := json.Unmarshal([]byte(errOut), &rec)
			if !tt.wantJSON {
				assert.Error(t, err, "plain text: %s", errOut)
				assert.Contains(t, errOut, "consumer: invalid configuration")
				assert.Contains(t, errOut, want)
				return
			}
			require.NoError(t, err, "one JSON record: %s", errOut)
			assert.Equal(t, "ERROR", rec["level"])
			assert.Equal(t, "configuration refused; not starting", rec["msg"])
			assert.Contains(t, rec["error"], want)
		})
	}
}
