package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

func TestLogOf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "consumer.yaml")
	require.NoError(t, os.WriteFile(file, []byte("log:\n  format: json\n  level: warn\nretry:\n  cap: nonsense\n"), 0o600))
	broken := filepath.Join(dir, "broken.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("log: [\n"), 0o600))
	tests := []struct {
		name string
		give []string
		env  map[string]string
		want config.Log
	}{
		{"defaults", nil, nil, config.Log{Format: "auto", Level: "info"}},
		{"flags", []string{"--log-format", "json", "-log-level=debug"}, nil, config.Log{Format: "json", Level: "debug"}},
		{"the last flag", []string{"--log-format", "json", "--log-format=text"}, nil, config.Log{Format: "text", Level: "info"}},
		{"not past --", []string{"--", "--log-format", "json"}, nil, config.Log{Format: "auto", Level: "info"}},
		{"a flag without its value", []string{"--log-format"}, nil, config.Log{Format: "auto", Level: "info"}},
		{"the environment", nil, map[string]string{"CONSUMER_LOG_FORMAT": "json"}, config.Log{Format: "json", Level: "info"}},
		{"the file, whatever else it holds", []string{"--config", file}, nil, config.Log{Format: "json", Level: "warn"}},
		{"the file from the environment", nil, map[string]string{"CONSUMER_CONFIG": file}, config.Log{Format: "json", Level: "warn"}},
		{"the environment over the file", []string{"--config=" + file}, map[string]string{"CONSUMER_LOG_LEVEL": "error"}, config.Log{Format: "json", Level: "error"}},
		{"the flag over the environment", []string{"--log-format", "text"}, map[string]string{"CONSUMER_LOG_FORMAT": "json"}, config.Log{Format: "text", Level: "info"}},
		{"--config= reads no file", []string{"--config="}, map[string]string{"CONSUMER_CONFIG": file}, config.Log{Format: "auto", Level: "info"}},
		{"a file that does not parse", []string{"--config", broken}, nil, config.Log{Format: "auto", Level: "info"}},
		{"a file that is not there", []string{"--config", filepath.Join(dir, "missing.yaml")}, nil, config.Log{Format: "auto", Level: "info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, config.LogOf(tt.give, func(k string) string { return tt.env[k] }))
		})
	}
}
