package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

// docs/CONFIGURATION.md's table is Reference(), so docs cannot drift.
func TestConfigurationDocHasTheReference(t *testing.T) {
	b, err := os.ReadFile("../docs/CONFIGURATION.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), config.Reference()),
		"docs/CONFIGURATION.md's table differs from config.Reference(); paste the new one")
}
