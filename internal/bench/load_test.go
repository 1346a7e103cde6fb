//go:build load

// The scenarios run whole with tiny sizes: load tests, kept out of the unit
// suite (go test -tags load ./internal/bench). CI's
// "consumer-bench --smoke" runs every scenario's machinery too.
package bench_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/bench"
)

func TestRunSmoke(t *testing.T) {
	cfg := bench.Smoke()
	cfg.N, cfg.StormN, cfg.SteadyFor, cfg.Pulls = 1000, 200, time.Second, []int{32, 64}
	// TestProcessScenario and TestEnginesScenario run theirs with their
	// own sizes.
	cfg.Scenarios = []string{bench.ScenarioOverhead, bench.ScenarioStorm, bench.ScenarioSteady}
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)

	require.NotNil(t, rep.Overhead)
	require.Len(t, rep.Overhead.Rows, 3, "one row per pull size, and the first with the breaker")
	for _, row := range rep.Overhead.Rows {
		for _, r := range []bench.Rate{row.Bare, row.FanOutDecode, row.Ours} {
			assert.Len(t, r.Runs, 2)
			assert.Positive(t, r.MsgsPerSec)
		}
		assert.Positive(t, row.Ratio)
	}
	require.NotNil(t, rep.Storm)
	assert.Equal(t, 200, rep.Storm.Jitter.Spread.Count, "every read came back once")
	assert.Equal(t, 200, rep.Storm.Fixed.Spread.Count)
	assert.Equal(t, 20, rep.Storm.Jitter.Spread.Windows, "a 2s band in 100ms windows")
	require.NotNil(t, rep.Steady)
	assert.Positive(t, rep.Steady.Held.Failed)
	assert.Zero(t, rep.Steady.Held.Missing, "every failed read has its asked delay and its second call")
	assert.Zero(t, rep.Steady.ServerSide.Missing)
	var table strings.Builder
	require.NoError(t, bench.WriteTable(&table, rep))
	for _, want := range []string{"overhead pull 32", "vs the fan-out decoding (32 goroutines that parse each message's metadata and decode its read, then ack)", "storm 200 x 503", "steady 1000/s"} {
		assert.Contains(t, table.String(), want)
	}
	_, err = json.Marshal(rep)
	require.NoError(t, err)
}

// The engine matrix with tiny sizes and one short policy: every cell runs,
// called the engine, and is judged in the table.
func TestEnginesScenario(t *testing.T) {
	cfg := bench.Smoke()
	cfg.Scenarios = []string{bench.ScenarioEngines}
	cfg.Replicas, cfg.EnginesFleets = []int{1}, []int{1}
	cfg.EnginesN, cfg.EnginesCapacityN = 60, 100
	cfg.EnginesDown, cfg.EnginesJoinFor, cfg.EnginesThrottleWait, cfg.EnginesSwitchAfter = 300*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	cfg.EnginesSlack = time.Second
	cfg.EnginesPolicies[0].Trickle = time.Second
	var trace strings.Builder // written by each fleet's tracer, stopped with its fleet
	cfg.EnginesTrace = &trace
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.NotNil(t, rep.Engines)
	require.Len(t, rep.Engines.Runs, 1)
	var kinds []string
	for _, c := range rep.Engines.Runs[0].Cells {
		kinds = append(kinds, c.Kind)
		assert.Positive(t, c.Product.Calls, "%s: the product called the engine", c.Engine)
		assert.Positive(t, c.Reads, c.Engine)
		switch c.Kind {
		case "healthy":
			assert.Positive(t, c.BareGoodput, "the bare client ran first")
		case "random":
			assert.InDelta(t, 60*0.4*0.4*0.4*0.4, c.Expected, 1e-9)
		case "join":
			assert.Positive(t, c.CrowdPerSec, "the other clients were served")
		case "down":
			assert.Positive(t, c.DownCalls, "the engine was down")
		}
	}
	assert.Equal(t, []string{"capacity", "healthy", "healthy", "mix", "mix", "mix", "switch", "account", "account", "random", "join", "down"}, kinds)

	var table strings.Builder
	require.NoError(t, bench.WriteTable(&table, rep))
	for _, want := range []string{"engines smoke: capacity C", "engines smoke: partial mix, failures answered at once",
		"10 reads/s for 1s", "engines smoke: partial mix at once, then at once the long tail", "one account throttled",
		"40% of all calls 503 at random", "kept full by 4 clients", "down for 300ms"} {
		assert.Contains(t, table.String(), want)
	}
	judged := 0
	for _, row := range rep.Rows() {
		if row.Met != "" {
			judged++
		}
	}
	assert.Greater(t, judged, 20, "each cell's targets are judged")

	// Every fleet's timeline: cell, milliseconds, calls, sheds, limits.
	lines := strings.Split(strings.TrimSpace(trace.String()), "\n")
	require.NotEmpty(t, lines)
	seen := map[string]bool{} // a cell, once a line has its replica's limit
	for _, l := range lines {
		f := strings.Split(l, "\t")
		require.Len(t, f, 5, l)
		assert.Regexp(t, `^\d+$`, f[1], l)
		assert.Regexp(t, `^\[\d*\]$`, f[4], "no limit before the replica has started, then its one: %s", l)
		seen[f[0]] = seen[f[0]] || f[4] != "[]"
	}
	assert.True(t, seen["smoke/capacity/1r"], "the capacity cell is traced: %v", seen)
	assert.True(t, seen["smoke/down/1r"], "the down cell is traced: %v", seen)
}

// TestProcessScenario runs the bare consumer (this test binary, see
// TestMain) and the product binary, built as consumer-bench builds them, as
// processes against a nats-server process: both stop cleanly (or Run
// fails), and every figure is measured.
func TestProcessScenario(t *testing.T) {
	t.Parallel()
	cfg := bench.Smoke()
	cfg.Scenarios, cfg.ProcessN, cfg.ProcessRounds = []string{bench.ScenarioProcess}, 500, 2
	dir := t.TempDir()
	var err error
	cfg.Binary, err = bench.BuildConsumer(t.Context(), dir)
	require.NoError(t, err)
	cfg.NATSServer, err = bench.BuildNATSServer(t.Context(), dir)
	require.NoError(t, err)
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
	for _, r := range slices.Concat(p.Bare, p.Product) {
		assert.Positive(t, r.ReadsPerSec)
		assert.Positive(t, r.Mallocs, "allocations counted")
		assert.Positive(t, r.AllocBytes)
		assert.Positive(t, r.CPUMicros, "CPU counted")
		assert.Positive(t, r.HWM)
	}
	assert.Positive(t, p.Ratio.Median)
	assert.LessOrEqual(t, p.Ratio.Min, p.Ratio.Median)
	assert.LessOrEqual(t, p.Ratio.Median, p.Ratio.Max)
	var targets []string
	for _, row := range rep.Rows() {
		if row.Target != "" {
			targets = append(targets, row.Target)
		}
	}
	assert.Equal(t, []string{">= 0.85", "<= 64 MiB"}, targets, "the ratio's target, and the binary's VmHWM's")
}
