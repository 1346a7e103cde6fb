package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

// The README's configuration table is Reference(), so docs cannot drift.
func TestReadmeHasTheReference(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), config.Reference()),
		"README.md's configuration table differs from config.Reference(); paste the new one")
}
