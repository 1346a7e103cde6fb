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
	ScenarioHTTP     = "http"
	ScenarioStorm    = "storm"
	ScenarioSteady   = "steady"
	ScenarioMemory   = "memory"
	ScenarioScaling  = "scaling"
)

// Scenarios lists every scenario in the order Run runs them.
func Scenarios() []string {
	return []string{ScenarioOverhead, ScenarioHTTP, ScenarioStorm, ScenarioSteady, ScenarioMemory, ScenarioScaling}
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
	// Binary is the consumer binary the memory scenario runs as a child
	// ("" skips the child); BinaryEnv is added to its environment.
	Binary    string
	BinaryEnv []string

	// Progress gets one line per step; nil discards them.
	Progress io.Writer
}

// Defaults is the full run: under five minutes on a 2-core machine.
func Defaults() Config {
	return Config{
		N:         200_000,
		Pulls:     []int{32, 64, 128, 256},
		StormN:    10_000,
		SteadyFor: 10 * time.Second,
		MemoryN:   1_000_000,
	}
}

// Smoke is every scenario with tiny sizes: it checks the machinery, and its
// figures mean little.
func Smoke() Config {
	return Config{
		N:         2_000,
		Pulls:     []int{32, 64, 128, 256},
		StormN:    500,
		SteadyFor: 2 * time.Second,
		MemoryN:   20_000,
	}
}

// Validate reports an unknown scenario or a size out of range.
func (c Config) Validate() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("bench: unknown scenario %q (want one of %v)", s, Scenarios())
		}
	}
	switch {
	case c.N < 1 || c.StormN < 1 || c.MemoryN < 1:
		return fmt.Errorf("bench: n (%d), storm n (%d) and memory n (%d) must be >= 1", c.N, c.StormN, c.MemoryN)
	case c.SteadyFor <= 0 || c.SteadyRate < 0:
		return fmt.Errorf("bench: steady duration (%s) must be > 0 and its rate (%d) >= 0", c.SteadyFor, c.SteadyRate)
	case len(c.Pulls) == 0:
		return errors.New("bench: at least one pull size")
	}
	for _, p := range c.Pulls {
		if p < 1 {
			return fmt.Errorf("bench: pull size %d must be >= 1", p)
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
