package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

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
