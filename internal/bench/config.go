package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Scenario names, in the order Run runs them.
const (
	ScenarioOverhead = "overhead"
	ScenarioStorm    = "storm"
	ScenarioSteady   = "steady"
	// ScenarioEngines is the engine matrix: every engine shape of issue 39,
	// each cell against its target, once per retry policy.
	ScenarioEngines = "engines"
	// ScenarioProcess: the product binary against a bare consumer, each a
	// process of its own, on one nats-server process.
	ScenarioProcess = "process"
)

// Scenarios lists every scenario in the order Run runs them.
func Scenarios() []string {
	return []string{ScenarioOverhead, ScenarioStorm, ScenarioSteady, ScenarioEngines, ScenarioProcess}
}

// Config says what to run and how big.
type Config struct {
	Scenarios []string // empty: all

	// N is the reads of one pass in the overhead scenario.
	N int
	// Pulls are the PullBatch sizes of the overhead scenario; the bare loop
	// of each row pulls the same. The first is compared with the breaker on
	// too (the binary's default).
	Pulls []int
	// StormN reads fail at once in the storm scenario.
	StormN int
	// SteadyFor is how long the steady scenario publishes; SteadyRate its
	// reads per second.
	SteadyFor  time.Duration
	SteadyRate int
	// Replicas are the fleet sizes of the engine matrix's capacity cells.
	Replicas []int
	// Seed seeds every random source the bench can seed: the rate
	// engines' shedding and service times, and each replica's limiter and
	// retry jitter.
	Seed uint64

	// EnginesN is the backlog of each backlog cell of the engine matrix
	// (the switch cell drains two), EnginesCapacityN that of its capacity
	// cells (one per fleet size of Replicas); EnginesRate the trickle
	// cells' reads a second (each policy says for how long).
	EnginesN         int
	EnginesCapacityN int
	EnginesRate      int
	// EnginesPolicies are the retry policies the matrix runs with, one
	// whole matrix each; EnginesFleets the fleet sizes of its rows at "1,
	// 4" replicas.
	EnginesPolicies []EnginesPolicy
	EnginesFleets   []int
	// EnginesCells, when not empty, runs only the cells whose name holds
	// one of them (say "capacity, 16" or "down"): to rerun a row.
	EnginesCells []string
	// EnginesDown is how long the down cell's engine is down from its
	// first call; EnginesJoinFor how long the join cell's replica runs;
	// EnginesThrottleWait the max_server_wait of the throttled-account
	// cells (their Retry-After of 60s is clamped to it); EnginesSwitchAfter
	// the longest the switch cell's first phase lasts.
	EnginesDown         time.Duration
	EnginesJoinFor      time.Duration
	EnginesThrottleWait time.Duration
	EnginesSwitchAfter  time.Duration
	// EnginesSlack is how long past its allowance (its reads at 500 a
	// second, the policy's longest chain of delays, and its own waits) a
	// cell may take before it is stopped.
	EnginesSlack time.Duration
	// EnginesTrace, when set, gets the timeline of every fleet the matrix
	// runs: a line every 5ms with the engine's calls and sheds so far and
	// each replica's limit (see tracer).
	EnginesTrace io.Writer

	// ProcessN is the backlog each process of the process scenario drains;
	// ProcessRounds how many times the bare consumer and the product each
	// drain it, alternately.
	ProcessN      int
	ProcessRounds int
	// ProcessProfile, when set, is a file prefix: the product runs with
	// --pprof-addr, and a CPU profile of it over each of its windows
	// (from the first ack, for ProcessProfileFor) is written to
	// <prefix>-<round>.pprof.
	ProcessProfile    string
	ProcessProfileFor time.Duration

	// Binary is the consumer binary the process scenario runs as a child
	// ("" skips the scenario).
	Binary string
	// NATSServer is the nats-server binary the process scenario runs (""
	// skips it): BuildNATSServer builds one.
	NATSServer string
	// Bare is the command that runs the bare consumer (BareConsumer), its
	// flags following: consumer-bench's is itself and "bare-consumer" (""
	// skips the process scenario); BareEnv is added to its environment.
	Bare    []string
	BareEnv []string

	// Progress gets one line per step; nil discards them.
	Progress io.Writer
}

// Defaults is the full run; how long it took is on the first line of the
// table in docs/PERFORMANCE.md. The engine matrix runs with the production
// retry policy and with short delays (base 50ms, cap 400ms, 4 attempts).
func Defaults() Config {
	return Config{
		N:             200_000,
		Pulls:         []int{32, 64, 128, 256},
		StormN:        10_000,
		SteadyFor:     10 * time.Second,
		SteadyRate:    5000,
		Replicas:      []int{1, 4, 16},
		ProcessN:      50_000,
		ProcessRounds: 3,
		Seed:          20261130,

		EnginesN:            3_000,
		EnginesCapacityN:    6_000,
		EnginesRate:         10,
		EnginesPolicies:     []EnginesPolicy{productionPolicy(), shortPolicy()},
		EnginesFleets:       []int{1, 4},
		EnginesDown:         10 * time.Second,
		EnginesJoinFor:      8 * time.Second,
		EnginesThrottleWait: 5 * time.Second,
		EnginesSwitchAfter:  5 * time.Second,
		EnginesSlack:        5 * time.Second,
	}
}

// Smoke is every scenario with tiny sizes: it checks the machinery, and its
// figures mean little. The engine matrix runs once, with a short policy
// (base 20ms, cap 100ms, 4 attempts), so that its always-failing reads
// exhaust in well under a second, one replica where its rows have 1 and 4.
func Smoke() Config {
	c := Defaults()
	c.N, c.StormN, c.SteadyFor, c.SteadyRate, c.Replicas, c.ProcessN, c.ProcessRounds = 2_000, 500, 2*time.Second, 1000, []int{1, 4}, 300, 2
	c.EnginesN, c.EnginesCapacityN, c.EnginesPolicies, c.EnginesFleets = 200, 400, []EnginesPolicy{smokeEnginesPolicy()}, []int{1}
	c.EnginesDown, c.EnginesJoinFor, c.EnginesThrottleWait, c.EnginesSwitchAfter, c.EnginesSlack = time.Second, time.Second, time.Second, time.Second, 2*time.Second
	return c
}

// smokeEnginesPolicy is the smoke run's only policy for the engine matrix:
// the production policy with a base of 20ms, a cap of 100ms and 4 attempts,
// its trickles 2s.
func smokeEnginesPolicy() EnginesPolicy {
	return enginesPolicy("smoke", 20*time.Millisecond, 100*time.Millisecond, 4, 2*time.Second)
}

// Validate reports an unknown scenario or a size out of range.
func (c Config) Validate() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("bench: unknown scenario %q (want one of %v)", s, Scenarios())
		}
	}
	switch {
	case c.N < 1 || c.StormN < 1:
		return fmt.Errorf("bench: n (%d) and storm n (%d) must be >= 1", c.N, c.StormN)
	case c.SteadyFor <= 0 || c.SteadyRate < 1:
		return fmt.Errorf("bench: steady duration (%s) must be > 0 and its rate (%d) >= 1", c.SteadyFor, c.SteadyRate)
	case len(c.Pulls) == 0:
		return errors.New("bench: at least one pull size")
	}
	if c.Runs(ScenarioEngines) {
		if err := c.validateEngines(); err != nil {
			return err
		}
	}
	if c.Runs(ScenarioProcess) && (c.ProcessN < 1 || c.ProcessRounds < 1) {
		return fmt.Errorf("bench: process n (%d) and rounds (%d) must be >= 1", c.ProcessN, c.ProcessRounds)
	}
	for _, p := range c.Pulls {
		if p < 1 {
			return fmt.Errorf("bench: pull size %d must be >= 1", p)
		}
	}
	for _, r := range c.Replicas {
		if r < 1 || r > maxReplicas {
			return fmt.Errorf("bench: replicas %d must be in [1, %d]", r, maxReplicas)
		}
	}
	if len(c.Replicas) == 0 && c.Runs(ScenarioEngines) {
		return errors.New("bench: at least one fleet size (replicas)")
	}
	return nil
}

// validateEngines checks the engine matrix's sizes and policies.
func (c Config) validateEngines() error {
	switch {
	case c.EnginesN < 1 || c.EnginesCapacityN < 1 || c.EnginesRate < 1:
		return fmt.Errorf("bench: engines n (%d), capacity n (%d) and rate (%d) must be >= 1", c.EnginesN, c.EnginesCapacityN, c.EnginesRate)
	case c.EnginesDown <= 0 || c.EnginesJoinFor <= 0 || c.EnginesThrottleWait <= 0 || c.EnginesSwitchAfter <= 0 || c.EnginesSlack <= 0:
		return fmt.Errorf("bench: engines down (%s), join (%s), throttle wait (%s), switch (%s) and slack (%s) must be > 0",
			c.EnginesDown, c.EnginesJoinFor, c.EnginesThrottleWait, c.EnginesSwitchAfter, c.EnginesSlack)
	case len(c.EnginesPolicies) == 0 || len(c.EnginesFleets) == 0:
		return errors.New("bench: engines: at least one policy and one fleet size")
	}
	for _, p := range c.EnginesPolicies {
		if err := p.Policy.Validate(); err != nil {
			return fmt.Errorf("bench: engines policy %s: %w", p.Name, err)
		}
		if p.Name == "" || p.Trickle < time.Second {
			return fmt.Errorf("bench: engines policy %q: a name, and a trickle of 1s or more (%s)", p.Name, p.Trickle)
		}
	}
	for _, r := range c.EnginesFleets {
		if r < 1 || r > maxReplicas {
			return fmt.Errorf("bench: engines fleet %d must be in [1, %d]", r, maxReplicas)
		}
	}
	return nil
}

// Runs reports whether the configuration runs scenario s.
func (c Config) Runs(s string) bool {
	return len(c.Scenarios) == 0 || slices.Contains(c.Scenarios, s)
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "bench: "+format+"\n", args...)
	}
}
