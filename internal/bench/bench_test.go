package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/meterline/meter-consumer/internal/bench"
	"github.com/meterline/meter-consumer/internal/meter"
)

// binDir holds the consumer binary the tests build, once.
var binDir string

// consumerBinary builds the consumer binary once for the package's tests:
// the scenarios that run it as a process run the real one, as
// consumer-bench does.
var consumerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "bench-consumer")
	if err != nil {
		return "", err
	}
	binDir = dir
	return bench.BuildConsumer(context.Background(), dir)
})

// natsServerBinary builds nats-server once, for the process scenario.
var natsServerBinary = sync.OnceValues(func() (string, error) {
	if _, err := consumerBinary(); err != nil { // makes binDir
		return "", err
	}
	return bench.BuildNATSServer(context.Background(), binDir)
})

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

func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario for about ten seconds")
	}
	cfg := bench.Smoke()
	cfg.N, cfg.StormN, cfg.MemoryN, cfg.SteadyFor = 1000, 200, 5000, time.Second
	cfg.Pulls = []int{32, 64}
	cfg.CapacityN, cfg.Replicas, cfg.FleetSlack, cfg.CycleWindow = 100, []int{2}, 2*time.Second, 300*time.Millisecond
	cfg.PartialN, cfg.PartialFor = 100, time.Second
	cfg.OutageN, cfg.OutageFor = 100, 300*time.Millisecond
	bin, err := consumerBinary()
	require.NoError(t, err)
	cfg.Binary = bin
	// TestAuditScenario, TestProcessScenario and TestEnginesScenario run
	// theirs with their own sizes.
	cfg.Scenarios = slices.DeleteFunc(bench.Scenarios(), func(s string) bool {
		return s == bench.ScenarioAudit || s == bench.ScenarioProcess || s == bench.ScenarioEngines
	})
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)

	require.NotNil(t, rep.Overhead)
	require.Len(t, rep.Overhead.Rows, 3, "one row per pull size, and the first with the breaker")
	for _, row := range rep.Overhead.Rows {
		assert.Len(t, row.Bare.Runs, 2)
		assert.Len(t, row.FanOut.Runs, 2)
		assert.Len(t, row.FanOutDecode.Runs, 2, "the fan-out decoding each read ran as often")
		assert.Positive(t, row.FanOutDecode.MsgsPerSec)
		assert.Len(t, row.Ours.Runs, 2)
		assert.Positive(t, row.Ratio)
	}
	require.NotNil(t, rep.HTTP)
	assert.Positive(t, rep.HTTP.Ratio)
	assert.Positive(t, rep.HTTP.FixedRatio)
	require.NotNil(t, rep.Storm)
	assert.Equal(t, 200, rep.Storm.Jitter.Spread.Count, "every read came back once")
	assert.Equal(t, 200, rep.Storm.Fixed.Spread.Count)
	assert.Equal(t, 20, rep.Storm.Jitter.Spread.Windows, "a 2s band in 100ms windows")
	require.NotNil(t, rep.Steady)
	assert.Positive(t, rep.Steady.Held.Failed)
	assert.Zero(t, rep.Steady.Held.Missing, "every failed read has its asked delay and its second call")
	assert.Zero(t, rep.Steady.ServerSide.Missing)
	require.NotNil(t, rep.Memory)
	assert.Empty(t, rep.Memory.Child.Skipped)
	assert.Positive(t, rep.Memory.Child.HWM)
	assert.Equal(t, "exit status 0", rep.Memory.Child.Exit, "the child stops cleanly on SIGTERM")
	assert.Positive(t, rep.Memory.Heap.Ours.Peak)
	require.NotNil(t, rep.Scaling)
	require.Len(t, rep.Scaling.Rows, 3)
	assert.Equal(t, []int{1, 2, 4}, []int{rep.Scaling.Rows[0].Instances, rep.Scaling.Rows[1].Instances, rep.Scaling.Rows[2].Instances})

	require.NotNil(t, rep.Capacity)
	require.Len(t, rep.Capacity.Rows, 1)
	assert.Equal(t, 2, rep.Capacity.Rows[0].Replicas)
	assert.Positive(t, rep.Capacity.Rows[0].Adaptive.Calls, "the adaptive fleet called the engine")
	assert.Positive(t, rep.Capacity.Rows[0].Fixed.Calls, "and the fixed one")
	require.NotNil(t, rep.CycleOpen)
	require.Len(t, rep.CycleOpen.Rows, 1)
	assert.Positive(t, rep.CycleOpen.Rows[0].Adaptive.Calls)
	assert.Positive(t, rep.CycleOpen.Rows[0].Fixed.Calls)

	require.NotNil(t, rep.RetryBudget)
	assert.Positive(t, rep.RetryBudget.Budget.Calls)
	assert.Positive(t, rep.RetryBudget.NoBudget.Calls)

	require.NotNil(t, rep.Partial)
	require.Len(t, rep.Partial.Rows, 4, "two latency shapes by two read mixes")
	for _, row := range rep.Partial.Rows {
		assert.Positive(t, row.Bare.Calls, "the bare client called the engine")
		assert.Positive(t, row.Product.Calls, "and the product")
	}

	require.NotNil(t, rep.Outage)
	require.Len(t, rep.Outage.Rows, 1)
	assert.Positive(t, rep.Outage.Rows[0].DownCalls, "the engine was down")
	assert.EqualValues(t, 100, rep.Outage.Rows[0].Run.Billed, "and every read billed once it was back")
	assert.Empty(t, rep.Outage.Rows[0].Run.DeadLetters, "none dead-lettered")

	var table strings.Builder
	require.NoError(t, bench.WriteTable(&table, rep))
	for _, want := range []string{"overhead pull 32", "vs the fan-out also parsing metadata and decoding each read", "http end to end", "storm 200 x 503", "steady", "memory, binary drains 5000", "scaling 4 instance(s)",
		"capacity 2 replica(s)", "cycle-open 2 replica(s)", "retry-budget 100 reads", "partial uniform 5-25ms, healthy reads, 100",
		"partial long tail, median 10ms p99 100ms, partial reads, 100", "outage 2 replica(s), 100 reads, down 300ms"} {
		assert.Contains(t, table.String(), want)
	}
	_, err = json.Marshal(rep)
	require.NoError(t, err)
}

// The engine matrix with tiny sizes and one short policy: every cell runs,
// called the engine, and is judged in the table.
func TestEnginesScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine matrix for about fifteen seconds")
	}
	cfg := bench.Smoke()
	cfg.Scenarios = []string{bench.ScenarioEngines}
	cfg.Replicas, cfg.EnginesFleets = []int{1}, []int{1}
	cfg.EnginesN, cfg.EnginesCapacityN = 60, 100
	cfg.EnginesDown, cfg.EnginesJoinFor, cfg.EnginesThrottleWait, cfg.EnginesSwitchAfter = 300*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	cfg.EnginesSlack = time.Second
	cfg.EnginesPolicies[0].Trickle = time.Second
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.NotNil(t, rep.Engines)
	require.Len(t, rep.Engines.Runs, 1)
	cells := rep.Engines.Runs[0].Cells
	var kinds []string
	for _, c := range cells {
		kinds = append(kinds, c.Kind)
		assert.Positive(t, c.Product.Calls, "%s: the product called the engine", c.Engine)
		assert.Positive(t, c.Reads, c.Engine)
	}
	assert.Equal(t, []string{"capacity", "healthy", "healthy", "mix", "mix", "mix", "switch", "account", "account", "random", "join", "down"}, kinds)
	for _, c := range cells {
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
}

func TestConfigValidate(t *testing.T) {
	cfg := bench.Defaults()
	require.NoError(t, cfg.Validate())
	cfg.Replicas = []int{1, 65}
	assert.ErrorContains(t, cfg.Validate(), "replicas 65 must be in [1, 64]")
	cfg.Replicas = nil
	assert.ErrorContains(t, cfg.Validate(), "at least one fleet size")
	cfg.Scenarios = []string{"overhead"}
	assert.NoError(t, cfg.Validate(), "no fleet scenario, no fleet size needed")
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
	cfg.Scenarios = []string{"capacity"}
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
