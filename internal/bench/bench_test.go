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

// bareEnv makes the test binary the process scenario's bare consumer: with
// it set, TestMain runs bench.BareConsumer on the arguments instead of the
// tests.
const bareEnv = "BENCH_TEST_BARE_CONSUMER=1"

func TestMain(m *testing.M) {
	if slices.Contains(os.Environ(), bareEnv) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := bench.BareConsumer(ctx, os.Args[1:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestConfigValidate(t *testing.T) {
	short, err := bench.EnginesPolicyNamed("short")
	require.NoError(t, err)
	short.Trickle = 0
	tests := []struct {
		name   string
		mutate func(*bench.Config)
		want   string // "": valid
	}{
		{"defaults", func(*bench.Config) {}, ""},
		{"smoke", func(c *bench.Config) { *c = bench.Smoke() }, ""},
		{"a fleet too big", func(c *bench.Config) { c.Replicas = []int{1, 65} }, "replicas 65 must be in [1, 64]"},
		{"no fleet size", func(c *bench.Config) { c.Replicas = nil }, "at least one fleet size"},
		{"no fleet size, no matrix", func(c *bench.Config) { c.Replicas, c.Scenarios = nil, []string{"overhead"} }, ""},
		{"unknown scenario", func(c *bench.Config) { c.Scenarios = []string{"overhead", "nope"} }, `unknown scenario "nope"`},
		{"no pull size", func(c *bench.Config) { c.Pulls = nil }, "at least one pull size"},
		{"a pull of 0", func(c *bench.Config) { c.Pulls = []int{32, 0} }, "pull size 0 must be >= 1"},
		{"a matrix fleet of 0", func(c *bench.Config) { c.EnginesFleets = []int{0} }, "engines fleet 0 must be in [1, 64]"},
		{"no policy", func(c *bench.Config) { c.EnginesPolicies = nil }, "at least one policy"},
		{"no policy, no matrix", func(c *bench.Config) { c.EnginesPolicies, c.Scenarios = nil, []string{"storm"} }, ""},
		{"no trickle", func(c *bench.Config) { c.EnginesPolicies = []bench.EnginesPolicy{short} }, "a trickle of 1s or more"},
	}
	for _, tt := range tests {
		cfg := bench.Defaults()
		tt.mutate(&cfg)
		if err := cfg.Validate(); tt.want == "" {
			assert.NoError(t, err, tt.name)
		} else {
			assert.ErrorContains(t, err, tt.want, tt.name)
		}
	}
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
	assert.Equal(t, `{"meter_id":"MTR-0001042","read_at":"2026-11-30T07:00:00Z","quantity":"2042.042","unit":"kWh",`+
		`"head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`, string(bench.Body(1042)))
	_, ok := bench.Index("MTR-x@2026-11-30T07:00:00Z")
	assert.False(t, ok)
}
