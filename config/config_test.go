package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
)

// valid returns Default with a downstream URL: the smallest valid Config.
func valid() config.Config {
	cfg := config.Default()
	cfg.Downstream.URL = "http://127.0.0.1:9090/reads"
	return cfg
}

func TestDefault(t *testing.T) {
	cfg := config.Default()
	assert.Equal(t, "METER_READS", cfg.Stream.Name)
	assert.Equal(t, []string{"meter.reads.>"}, cfg.Stream.Subjects)
	assert.Equal(t, 32, cfg.Consumer.Concurrency)
	assert.Equal(t, 30*time.Second, cfg.Consumer.AckWait)
	assert.Equal(t, []int{400, 404, 405, 410, 413, 414, 415, 422}, cfg.Downstream.PermanentStatuses)
	assert.Empty(t, cfg.Downstream.URL)
	require.ErrorContains(t, cfg.Validate(), "downstream.url")
}

func TestDefaultWithDownstreamValidates(t *testing.T) {
	require.NoError(t, valid().Validate())
}

func TestDefaultDemoValidates(t *testing.T) {
	cfg := config.Default()
	cfg.Demo = true
	require.NoError(t, cfg.Validate())
}

func TestDefaultDoesNotShareSlices(t *testing.T) {
	a := config.Default()
	a.Stream.Subjects[0] = "changed"
	a.Downstream.PermanentStatuses[0] = 499
	b := config.Default()
	assert.Equal(t, "meter.reads.>", b.Stream.Subjects[0])
	assert.Equal(t, 400, b.Downstream.PermanentStatuses[0])
}

func TestRetryPolicy(t *testing.T) {
	cfg := config.Default()
	want := retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
	assert.Equal(t, want, cfg.Retry.Policy())
	require.NoError(t, cfg.Retry.Policy().Validate())
}
