package config_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

func TestUsage(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf)
	out := buf.String()
	for _, want := range []string{
		"Usage: consumer [flags]",
		"--config path",
		"--ack-wait duration",
		"env CONSUMER_ACK_WAIT, yaml consumer.ack_wait, default 30s",
		"--max-server-wait duration",
		"default 5m)",
		"--permanent-statuses ints",
		"--subjects list",
		"--demo  ",
		"NATS_PASSWORD",
	} {
		assert.Contains(t, out, want)
	}
}

func TestReference(t *testing.T) {
	ref := config.Reference()
	lines := strings.Split(strings.TrimSuffix(ref, "\n"), "\n")
	require.Greater(t, len(lines), 2)
	assert.Equal(t, "| Flag | Environment | YAML | Default | Description |", lines[0])
	assert.Equal(t, "|------|-------------|------|---------|-------------|", lines[1])
	for _, line := range lines[2:] {
		assert.Equal(t, 4, strings.Count(line, " | "), "five cells: %s", line)
	}
	for _, want := range []string{
		"| `--config` | `CONSUMER_CONFIG` |  |  |",
		"| `--nats-url` | `NATS_URL` | `nats.url` |  |",
		"| `--nats-creds` | `NATS_CREDS` | `nats.creds` |  |",
		"| `--dlq-prefix` | `CONSUMER_DLQ_PREFIX` | `dlq.prefix` | `meter.dlq` |",
		"| `--max-attempts` | `CONSUMER_MAX_ATTEMPTS` | `retry.max_attempts` | `6` |",
		"| `--retry-base` | `CONSUMER_RETRY_BASE` | `retry.base` | `500ms` |",
		"| `--permanent-statuses` | `CONSUMER_PERMANENT_STATUSES` | `downstream.permanent_statuses` | `400,404,405,410,413,414,415,422` |",
		"| `--create-streams` | `CONSUMER_CREATE_STREAMS` | `stream.create` | `false` |",
	} {
		assert.Contains(t, ref, want)
	}
}

const configurationDoc = "../docs/CONFIGURATION.md"

// docs/CONFIGURATION.md's table is Reference(), so docs cannot drift. With
// UPDATE_DOCS=1 the test writes the table into the document instead.
func TestConfigurationDocHasTheReference(t *testing.T) {
	b, err := os.ReadFile(configurationDoc)
	require.NoError(t, err)
	if os.Getenv("UPDATE_DOCS") != "" {
		table := regexp.MustCompile(`(?s)\| Flag \| Environment \| YAML \| Default \| Description \|\n.*?\n\n`)
		require.True(t, table.Match(b), "no table to replace")
		b = table.ReplaceAll(b, []byte(config.Reference()+"\n"))
		require.NoError(t, os.WriteFile(configurationDoc, b, 0o644))
	}
	assert.True(t, strings.Contains(string(b), config.Reference()),
		"docs/CONFIGURATION.md's table differs from config.Reference(): UPDATE_DOCS=1 go test ./config -run TestConfigurationDocHasTheReference")
}
