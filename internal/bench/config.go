package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Scenario names, in the order Run runs them.
const (
	ScenarioOverhead = "overhead"
	ScenarioHTTP     = "http"
	ScenarioStorm    = "storm"
	ScenarioSteady   = "steady"
	ScenarioMemory   = "memory"
	ScenarioScaling  = "scaling"
	// ScenarioCapacity and ScenarioCycleOpen put fleets of pipelines
	// against a rate engine with a capacity.
	ScenarioCapacity  = "capacity"
	ScenarioCycleOpen = "cycle-open"
	// ScenarioRetryBudget is one replica's held retries against the retry
	// budget.
	ScenarioRetryBudget = "retry-budget"
	// ScenarioPartial is one replica against an engine of ample capacity
	// whose latency spreads and which fails some reads, against a bare
	// client.
	ScenarioPartial = "partial"
	// ScenarioAudit: consumer audit, the binary, over a settled backlog
	// with planted findings (docs/AUDIT.md).
	ScenarioAudit = "audit"
	// ScenarioOutage: fleets draining a backlog from an engine down for a
	// while, then back.
	ScenarioOutage = "outage"
	// ScenarioProcess: the product binary against a bare consumer, each a
	// process of its own, on one nats-server process.
	ScenarioProcess = "process"
	// ScenarioEngines is the engine matrix: every engine shape of issue 39,
	// each cell against its target, once per retry policy.
	ScenarioEngines = "engines"
)

// Scenarios lists every scenario in the order Run runs them.
func Scenarios() []string {
	return []string{ScenarioOverhead, ScenarioHTTP, ScenarioStorm, ScenarioSteady, ScenarioMemory, ScenarioScaling,
		ScenarioCapacity, ScenarioCycleOpen, ScenarioRetryBudget, ScenarioPartial, ScenarioOutage, ScenarioEngines, ScenarioAudit, ScenarioProcess}
}

// Config says what to run and how big.
type Config struct {
	Scenarios []string // empty: all

	// N is the reads of one pass in the overhead, http and scaling
	// scenarios and of the in-process heap measure.
	N int
	// Pulls are the PullBatch sizes of the overhead scenario; the bare loop
	// of each row pulls the same. The first is compared with the breaker on
	// too (the binary's default).
	Pulls []int
	// StormN reads fail at once in the storm scenario.
	StormN int
	// SteadyFor is how long the steady scenario publishes; SteadyRate its
	// reads per second (0: 70% of the http scenario's pipeline rate, at most
	// 5000/s; 5000/s without it).
	SteadyFor  time.Duration
	SteadyRate int
	// MemoryN is the backlog the consumer binary drains in the memory
	// scenario.
	MemoryN int
	// CapacityN is the backlog each fleet drains in the capacity and
	// retry-budget scenarios;
	// Replicas are the fleet sizes of the capacity and cycle-open
	// scenarios.
	CapacityN int
	Replicas  []int
	// FleetSlack is how long past the ideal drain (backlog / capacity) a
	// fleet of the capacity scenario may take before it is stopped, and
	// how long the retry-budget scenario's replica may take;
	// CycleWindow is how long the cycle-open
	// scenario measures each fleet from its start.
	FleetSlack  time.Duration
	CycleWindow time.Duration
	// PartialN is the backlog each variant of the partial scenario drains;
	// PartialFor how long one may take before it is stopped; PartialRetry
	// the retry policy of its variants.
	PartialN     int
	PartialFor   time.Duration
	PartialRetry retry.Policy
	// Seed seeds every random source the bench can seed: the rate
	// engines' shedding and service times, and each replica's limiter and
	// retry jitter.
	Seed uint64

	// OutageN is the backlog of the outage scenario, OutageFor how long its
	// engine is down from its first call.
	OutageN   int
	OutageFor time.Duration

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

	// AuditN is the reads the audit scenario audits.
	AuditN int

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

	// Binary is the consumer binary the memory, audit and process
	// scenarios run as a child ("" skips the child); BinaryEnv is added to
	// its environment.
	Binary    string
	BinaryEnv []string
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
// table in docs/PERFORMANCE.md, and the audit rows give the audit's own time.
// The partial scenario uses the production retry policy; the engine matrix
// runs with it and with short delays (base 50ms, cap 400ms, 4 attempts).
func Defaults() Config {
	return Config{
		N:             200_000,
		Pulls:         []int{32, 64, 128, 256},
		StormN:        10_000,
		SteadyFor:     10 * time.Second,
		MemoryN:       1_000_000,
		CapacityN:     20_000,
		Replicas:      []int{1, 4, 16},
		FleetSlack:    30 * time.Second,
		CycleWindow:   5 * time.Second,
		PartialN:      10_000,
		PartialFor:    30 * time.Second,
		PartialRetry:  config.Default().Retry.Policy(),
		OutageN:       2_000,
		OutageFor:     10 * time.Second,
		AuditN:        1_000_000,
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
// figures mean little. The partial scenario's retry policy is shortened
// (base 20ms, cap 100ms, the production attempts), so that its always-failing
// reads exhaust in well under a second; the engine matrix runs once, with
// that policy at 4 attempts, one replica where its rows have 1 and 4.
func Smoke() Config {
	return Config{
		N:             2_000,
		Pulls:         []int{32, 64, 128, 256},
		StormN:        500,
		SteadyFor:     2 * time.Second,
		MemoryN:       20_000,
		CapacityN:     400,
		Replicas:      []int{1, 4},
		FleetSlack:    5 * time.Second,
		CycleWindow:   time.Second,
		PartialN:      200,
		PartialFor:    2 * time.Second,
		PartialRetry:  smokeRetry(),
		OutageN:       200,
		OutageFor:     2 * time.Second,
		AuditN:        5_000,
		ProcessN:      300,
		ProcessRounds: 2,
		Seed:          20261130,

		EnginesN:            200,
		EnginesCapacityN:    400,
		EnginesRate:         10,
		EnginesPolicies:     []EnginesPolicy{smokeEnginesPolicy()},
		EnginesFleets:       []int{1},
		EnginesDown:         time.Second,
		EnginesJoinFor:      time.Second,
		EnginesThrottleWait: time.Second,
		EnginesSwitchAfter:  time.Second,
		EnginesSlack:        2 * time.Second,
	}
}

// smokeEnginesPolicy is the smoke run's only policy for the engine matrix:
// smokeRetry with 4 attempts, its trickles 2s.
func smokeEnginesPolicy() EnginesPolicy {
	p := smokeRetry()
	p.MaxAttempts = 4
	return EnginesPolicy{Name: "smoke", Policy: p, Trickle: 2 * time.Second}
}

// smokeRetry is the production retry policy with a base of 20ms and a cap of
// 100ms.
func smokeRetry() retry.Policy {
	p := config.Default().Retry.Policy()
	p.Base, p.Cap = 20*time.Millisecond, 100*time.Millisecond
	return p
}

// Validate reports an unknown scenario or a size out of range.
func (c Config) Validate() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("bench: unknown scenario %q (want one of %v)", s, Scenarios())
		}
	}
	switch {
	case c.N < 1 || c.StormN < 1 || c.MemoryN < 1 || c.CapacityN < 1:
		return fmt.Errorf("bench: n (%d), storm n (%d), memory n (%d) and capacity n (%d) must be >= 1",
			c.N, c.StormN, c.MemoryN, c.CapacityN)
	case c.FleetSlack <= 0 || c.CycleWindow <= 0:
		return fmt.Errorf("bench: fleet slack (%s) and cycle window (%s) must be > 0", c.FleetSlack, c.CycleWindow)
	case c.SteadyFor <= 0 || c.SteadyRate < 0:
		return fmt.Errorf("bench: steady duration (%s) must be > 0 and its rate (%d) >= 0", c.SteadyFor, c.SteadyRate)
	case len(c.Pulls) == 0:
		return errors.New("bench: at least one pull size")
	}
	if c.Runs(ScenarioPartial) {
		if c.PartialN < 1 || c.PartialFor <= 0 {
			return fmt.Errorf("bench: partial n (%d) must be >= 1 and its deadline (%s) > 0", c.PartialN, c.PartialFor)
		}
		if err := c.PartialRetry.Validate(); err != nil {
			return fmt.Errorf("bench: partial retry policy: %w", err)
		}
	}
	if c.Runs(ScenarioOutage) && (c.OutageN < 1 || c.OutageFor <= 0) {
		return fmt.Errorf("bench: outage n (%d) must be >= 1 and its outage (%s) > 0", c.OutageN, c.OutageFor)
	}
	if c.Runs(ScenarioEngines) {
		if err := c.validateEngines(); err != nil {
			return err
		}
	}
	if c.Runs(ScenarioProcess) && (c.ProcessN < 1 || c.ProcessRounds < 1) {
		return fmt.Errorf("bench: process n (%d) and rounds (%d) must be >= 1", c.ProcessN, c.ProcessRounds)
	}
	if c.Runs(ScenarioAudit) && c.AuditN < 2 {
		return fmt.Errorf("bench: audit n (%d) must be >= 2", c.AuditN)
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
	if len(c.Replicas) == 0 && (c.Runs(ScenarioCapacity) || c.Runs(ScenarioCycleOpen) || c.Runs(ScenarioEngines)) {
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
