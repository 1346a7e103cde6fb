package bench_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/bench"
)

// TestProcessScenario runs the bare consumer (this test binary, see
// TestMain) and the product binary as processes against a nats-server
// process: every read reaches the engine once with its key, both stop
// cleanly, and every figure is measured.
func TestProcessScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the consumer binary and nats-server")
	}
	t.Parallel()
	bin, err := consumerBinary()
	require.NoError(t, err)
	srv, err := natsServerBinary()
	require.NoError(t, err)
	cfg := bench.Smoke()
	cfg.Scenarios, cfg.ProcessN, cfg.ProcessRounds = []string{bench.ScenarioProcess}, 500, 2
	cfg.Binary, cfg.NATSServer = bin, srv
	cfg.Bare, cfg.BareEnv = []string{os.Args[0]}, []string{bareEnv}
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	p := rep.Process
	require.NotNil(t, p)
	require.Empty(t, p.Skipped)
	assert.Equal(t, 300, p.BodyBytes)
	assert.Contains(t, p.Server, "nats-server")
	require.Len(t, p.Bare, 2)
	require.Len(t, p.Product, 2)
	require.Len(t, p.Ratios, 2)
	for _, runs := range [][]bench.ProcessRun{p.Bare, p.Product} {
		for _, r := range runs {
			assert.Positive(t, r.ReadsPerSec)
			assert.Positive(t, r.Mallocs, "allocations counted")
			assert.Positive(t, r.AllocBytes)
			assert.Positive(t, r.Syscalls, "syscalls counted")
			assert.Positive(t, r.HWM)
			assert.Equal(t, bench.KeyTally{Calls: 500}, r.Engine, "every read posted once, with its key")
			assert.Equal(t, "exit status 0", r.Exit, "stopped cleanly by SIGTERM")
		}
	}
	assert.Positive(t, p.Ratio.Median)
	assert.LessOrEqual(t, p.Ratio.Min, p.Ratio.Median)
	assert.LessOrEqual(t, p.Ratio.Median, p.Ratio.Max)
	var found bool
	for _, row := range rep.Rows() {
		if row.Target != "" {
			found = true
			assert.Equal(t, ">= 0.85", row.Target)
		}
	}
	assert.True(t, found, "a target row")
}

func TestBareConsumerNeedsItsFlags(t *testing.T) {
	err := bench.BareConsumer(t.Context(), []string{"--nats-url", "nats://127.0.0.1:1"}, os.Stdout)
	assert.ErrorContains(t, err, "are required")
}
