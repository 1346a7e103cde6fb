package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/meterline/meter-consumer/config"
)

// WriteYAML writes the effective configuration, redacted, as a file Load
// reads back into the same configuration.
func TestWriteYAMLReadsBack(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"NATS_PASSWORD":               "hunter2-secret",
		"NATS_USER":                   "alice",
		"CONSUMER_DOWNSTREAM_HEADERS": "X-Tenant: north\nX-Api-Key: api-secret",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load([]string{"--nats-url", "nats://bob:pw-secret@nats.example:4222", "--downstream-url", "https://engine.example/reads",
		"--retry-cap", "2m", "--subjects", "meter.reads.a,meter.reads.b", "--permanent-statuses", "400,422"}, getenv)
	require.NoError(t, err)

	var buf bytes.Buffer
	require.NoError(t, cfg.WriteYAML(&buf))
	out := buf.String()
	assert.NotContains(t, out, "secret")
	assert.Contains(t, out, "password: REDACTED")
	assert.Contains(t, out, "cap: 2m\n", "durations as in a configuration file")
	assert.Contains(t, out, "subjects: [meter.reads.a, meter.reads.b]")
	t.Log(out)

	file := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o600))
	back, err := config.Load([]string{"--config", file}, nil)
	require.NoError(t, err)
	assert.Equal(t, cfg.Redacted(), back, "every setting reads back as it was, secrets redacted")
}

// Every setting is written, once: the keys of consumer.example.yaml.
func TestWriteYAMLHasTheExampleKeys(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, config.Default().WriteYAML(&buf))
	example, err := os.ReadFile("consumer.example.yaml")
	require.NoError(t, err)
	assert.ElementsMatch(t, yamlPaths(t, example), yamlPaths(t, buf.Bytes()))
}

// yamlPaths returns the dotted paths of the leaves of a YAML document, in
// document order.
func yamlPaths(t *testing.T, data []byte) []string {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	var paths []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			path := prefix + n.Content[i].Value
			if v := n.Content[i+1]; v.Kind == yaml.MappingNode && len(v.Content) > 0 && path != "downstream.headers" {
				walk(v, path+".")
				continue
			}
			paths = append(paths, path)
		}
	}
	walk(doc.Content[0], "")
	return paths
}
