package bench

import (
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
	ScenarioEngines  = "engines" // the engine matrix, once per retry policy
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
	Scenarios []string `json:"scenarios"` // empty: all

	N          int           `json:"n"`             // reads of one pass of the overhead
	Pulls      []int         `json:"pulls"`         // the overhead's PullBatch sizes; the first also with the breaker on
	StormN     int           `json:"storm_n"`       // reads that fail at once in the storm
	SteadyFor  time.Duration `json:"steady_for_ns"` // how long the steady publishes
	SteadyRate int           `json:"steady_rate"`   // and how many reads a second
	Replicas   []int         `json:"replicas"`      // fleet sizes of the engine matrix's capacity cells
	// Seed seeds every random source the bench can seed: the rate engines'
	// shedding and service times, and each replica's limiter and jitter.
	Seed uint64 `json:"seed"`

	EnginesN         int             `json:"engines_n"`          // backlog of each backlog cell of the engine matrix (the switch cell drains two)
	EnginesCapacityN int             `json:"engines_capacity_n"` // backlog of each capacity cell
	EnginesRate      int             `json:"engines_rate"`       // reads a second of the trickle cells
	EnginesPolicies  []EnginesPolicy `json:"engines_policies"`   // retry policies, a whole matrix each
	EnginesFleets    []int           `json:"engines_fleets"`     // fleet sizes of the rows at "1, 4" replicas
	// EnginesCells, when not empty, runs only the cells whose name holds one
	// of them (say "capacity, 16" or "down"): to rerun a row.
	EnginesCells        []string      `json:"engines_cells"`
	EnginesDown         time.Duration `json:"engines_down_ns"`          // how long the down cell's engine is down
	EnginesJoinFor      time.Duration `json:"engines_join_for_ns"`      // how long the join cell's replica runs
	EnginesThrottleWait time.Duration `json:"engines_throttle_wait_ns"` // the throttled cells' max_server_wait (their Retry-After of 60s is clamped to it)
	EnginesSwitchAfter  time.Duration `json:"engines_switch_after_ns"`  // the longest first phase of the switch cell
	// EnginesSlack is how long past its allowance (its reads at 500 a second,
	// the policy's longest chain of delays, its own waits) a cell may take
	// before it is stopped.
	EnginesSlack time.Duration `json:"engines_slack_ns"`
	EnginesTrace io.Writer     `json:"-"` // gets the timeline of every fleet (see tracer)

	ProcessN      int `json:"process_n"`      // backlog each process of the process scenario drains
	ProcessRounds int `json:"process_rounds"` // times the bare consumer and the product each drain it, alternately
	// ProcessProfile, when set, is a file prefix: the product runs with
	// --pprof-addr, and a CPU profile of each of its windows (from the first
	// ack, for ProcessProfileFor) is written to <prefix>-<round>.pprof.
	ProcessProfile    string        `json:"-"`
	ProcessProfileFor time.Duration `json:"-"`
	// Binary is the consumer binary and NATSServer the nats-server binary
	// the process scenario runs (BuildConsumer, BuildNATSServer); Bare is the
	// command of the bare consumer (BareConsumer), its flags following, with
	// BareEnv added to its environment. Any of the three empty skips the
	// scenario.
	Binary     string   `json:"-"`
	NATSServer string   `json:"-"`
	Bare       []string `json:"-"`
	BareEnv    []string `json:"-"`

	Progress io.Writer `json:"-"` // gets one line per step; nil discards them
}

// Defaults is the full run; how long it took is on the first line of the
// table in docs/PERFORMANCE.md.
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
// figures mean little. The engine matrix runs once, with one replica where
// its rows have 1 and 4, and a short policy (base 20ms, cap 100ms, 4
// attempts, trickles of 2s) whose always-failing reads exhaust in well
// under a second.
func Smoke() Config {
	c := Defaults()
	c.N, c.StormN, c.SteadyFor, c.SteadyRate, c.Replicas, c.ProcessN, c.ProcessRounds = 2_000, 500, 2*time.Second, 1000, []int{1, 4}, 300, 2
	c.EnginesN, c.EnginesCapacityN, c.EnginesFleets = 200, 400, []int{1}
	c.EnginesPolicies = []EnginesPolicy{enginesPolicy("smoke", 20*time.Millisecond, 100*time.Millisecond, 4, 2*time.Second)}
	c.EnginesDown, c.EnginesJoinFor, c.EnginesThrottleWait, c.EnginesSwitchAfter, c.EnginesSlack = time.Second, time.Second, time.Second, time.Second, 2*time.Second
	return c
}

// Validate reports the first unknown scenario or size out of range.
func (c Config) Validate() error {
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf("bench: "+format, args...))
		}
	}
	for _, s := range c.Scenarios {
		check(!slices.Contains(Scenarios(), s), "unknown scenario %q (want one of %v)", s, Scenarios())
	}
	check(c.N < 1 || c.StormN < 1, "n (%d) and storm n (%d) must be >= 1", c.N, c.StormN)
	check(c.SteadyFor <= 0 || c.SteadyRate < 1, "steady duration (%s) must be > 0 and its rate (%d) >= 1", c.SteadyFor, c.SteadyRate)
	check(len(c.Pulls) == 0, "at least one pull size")
	if c.Runs(ScenarioEngines) {
		check(c.EnginesN < 1 || c.EnginesCapacityN < 1 || c.EnginesRate < 1,
			"engines n (%d), capacity n (%d) and rate (%d) must be >= 1", c.EnginesN, c.EnginesCapacityN, c.EnginesRate)
		check(c.EnginesDown <= 0 || c.EnginesJoinFor <= 0 || c.EnginesThrottleWait <= 0 || c.EnginesSwitchAfter <= 0 || c.EnginesSlack <= 0,
			"engines down (%s), join (%s), throttle wait (%s), switch (%s) and slack (%s) must be > 0",
			c.EnginesDown, c.EnginesJoinFor, c.EnginesThrottleWait, c.EnginesSwitchAfter, c.EnginesSlack)
		check(len(c.EnginesPolicies) == 0 || len(c.EnginesFleets) == 0, "engines: at least one policy and one fleet size")
		for _, p := range c.EnginesPolicies {
			err := p.Policy.Validate()
			check(err != nil, "engines policy %s: %w", p.Name, err)
			check(p.Name == "" || p.Trickle < time.Second, "engines policy %q: a name, and a trickle of 1s or more (%s)", p.Name, p.Trickle)
		}
		for _, r := range c.EnginesFleets {
			check(r < 1 || r > maxReplicas, "engines fleet %d must be in [1, %d]", r, maxReplicas)
		}
	}
	check(c.Runs(ScenarioProcess) && (c.ProcessN < 1 || c.ProcessRounds < 1), "process n (%d) and rounds (%d) must be >= 1", c.ProcessN, c.ProcessRounds)
	for _, p := range c.Pulls {
		check(p < 1, "pull size %d must be >= 1", p)
	}
	for _, r := range c.Replicas {
		check(r < 1 || r > maxReplicas, "replicas %d must be in [1, %d]", r, maxReplicas)
	}
	check(len(c.Replicas) == 0 && c.Runs(ScenarioEngines), "at least one fleet size (replicas)")
	if len(errs) == 0 {
		return nil
	}
	return errs[0] // the first, in the order checked
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
