package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/meterline/meter-consumer/internal/bench"
	"github.com/meterline/meter-consumer/internal/meter"
)

// binDir holds the binaries the load tests build (load_test.go), removed
// once the tests end.
var binDir string

// bareEnv makes the test binary the process scenario's bare consumer: with
// it set, TestMain runs bench.BareConsumer on the arguments instead of the
// tests.
const bareEnv = "BENCH_TEST_BARE_CONSUMER=1"

func TestMain(m *testing.M) {
	if slices.Contains(os.Environ(), bareEnv) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := bench.BareConsumer(ctx, os.Args[1:], os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestConfigValidate(t *testing.T) {
	cfg := bench.Defaults()
	require.NoError(t, cfg.Validate())
	cfg.Replicas = []int{1, 65}
	assert.ErrorContains(t, cfg.Validate(), "replicas 65 must be in [1, 64]")
	cfg.Replicas = nil
	assert.ErrorContains(t, cfg.Validate(), "at least one fleet size")
	cfg.Scenarios = []string{"overhead"}
	assert.NoError(t, cfg.Validate(), "no engine matrix, no fleet size needed")
	cfg = bench.Defaults()
	cfg.Scenarios = []string{"overhead", "nope"}
	assert.ErrorContains(t, cfg.Validate(), `unknown scenario "nope"`)
	cfg = bench.Smoke()
	cfg.Pulls = nil
	assert.Error(t, cfg.Validate())

	cfg = bench.Defaults()
	cfg.EnginesFleets = []int{0}
	assert.ErrorContains(t, cfg.Validate(), "engines fleet 0 must be in [1, 64]")
	cfg = bench.Defaults()
	cfg.EnginesPolicies = nil
	assert.ErrorContains(t, cfg.Validate(), "at least one policy")
	cfg.Scenarios = []string{"storm"}
	assert.NoError(t, cfg.Validate(), "no engine matrix, no policy needed")
	p, err := bench.EnginesPolicyNamed("short")
	require.NoError(t, err)
	p.Trickle = 0
	cfg = bench.Defaults()
	cfg.EnginesPolicies = []bench.EnginesPolicy{p}
	assert.ErrorContains(t, cfg.Validate(), "a trickle of 1s or more")
}

func TestBodyIsAValidReadOfAboutTwoHundredBytes(t *testing.T) {
	for _, i := range []int{0, 7, 42, 999, 1000, 123456, 9999999, 12345678} {
		b := bench.Body(i)
		assert.InDelta(t, 200, len(b), 20, string(b))
		r, err := meter.Decode(b)
		require.NoError(t, err, string(b))
		assert.Equal(t, bench.Key(i), r.IdempotencyKey)
		got, ok := bench.Index(r.IdempotencyKey)
		assert.True(t, ok)
		assert.Equal(t, i, got)
	}
	_, ok := bench.Index("MTR-x@2026-11-30T07:00:00Z")
	assert.False(t, ok)
}
