package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// Report is everything one run measured.
type Report struct {
	Started   time.Time     `json:"started"`
	Took      time.Duration `json:"took_ns"`
	GoVersion string        `json:"go_version"`
	CPUs      int           `json:"cpus"`
	Config    RunConfig     `json:"config"`

	Overhead *Overhead   `json:"overhead,omitempty"`
	HTTP     *HTTPResult `json:"http,omitempty"`
	Storm    *Storm      `json:"storm,omitempty"`
	Steady   *Steady     `json:"steady,omitempty"`
	Memory   *Memory     `json:"memory,omitempty"`
	Scaling  *Scaling    `json:"scaling,omitempty"`

	Capacity    *Capacity    `json:"capacity,omitempty"`
	CycleOpen   *CycleOpen   `json:"cycle_open,omitempty"`
	RetryBudget *RetryBudget `json:"retry_budget,omitempty"`
	Outage      *Outage      `json:"outage,omitempty"`
	Partial     *Partial     `json:"partial,omitempty"`
	Engines     *Engines     `json:"engines,omitempty"`
	Audit       *Audit       `json:"audit,omitempty"`
	Process     *Process     `json:"process,omitempty"`
}

// RunConfig is the part of Config a report records.
type RunConfig struct {
	Scenarios     []string      `json:"scenarios"`
	N             int           `json:"n"`
	Pulls         []int         `json:"pulls"`
	StormN        int           `json:"storm_n"`
	SteadyFor     time.Duration `json:"steady_for_ns"`
	MemoryN       int           `json:"memory_n"`
	CapacityN     int           `json:"capacity_n"`
	Replicas      []int         `json:"replicas"`
	PartialN      int           `json:"partial_n"`
	PartialFor    time.Duration `json:"partial_deadline_ns"`
	Seed          uint64        `json:"seed"`
	AuditN        int           `json:"audit_n"`
	ProcessN      int           `json:"process_n"`
	ProcessRounds int           `json:"process_rounds"`
}

// steadyRateCap bounds the steady scenario's publish rate.
const steadyRateCap = 5000

// Run starts an in-process server (unless the process scenario, which runs
// its own, is the only one) and runs the scenarios cfg selects, in
// order, stopping at the first error.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep = &Report{Started: time.Now(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Config: RunConfig{
		Scenarios: cfg.Scenarios, N: cfg.N, Pulls: cfg.Pulls, StormN: cfg.StormN, SteadyFor: cfg.SteadyFor, MemoryN: cfg.MemoryN,
		CapacityN: cfg.CapacityN, Replicas: cfg.Replicas, PartialN: cfg.PartialN, PartialFor: cfg.PartialFor, Seed: cfg.Seed,
		AuditN: cfg.AuditN, ProcessN: cfg.ProcessN, ProcessRounds: cfg.ProcessRounds,
	}}
	if len(rep.Config.Scenarios) == 0 {
		rep.Config.Scenarios = Scenarios()
	}
	// The process scenario runs its own nats-server process: alone, it
	// needs no in-process server idling beside its engine.
	var e *env
	if slices.ContainsFunc(rep.Config.Scenarios, func(s string) bool { return s != ScenarioProcess }) {
		var srv *Server
		labelled(ctx, sideServer, func(context.Context) { srv, err = StartServer() })
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		if e, err = newEnv(srv.URL()); err != nil {
			return nil, err
		}
		defer e.close()
	}

	steps := []struct {
		name string
		run  func() error
	}{
		{ScenarioOverhead, func() (err error) { rep.Overhead, err = runOverhead(ctx, e, cfg); return err }},
		{ScenarioHTTP, func() (err error) { rep.HTTP, err = runHTTP(ctx, e, cfg); return err }},
		{ScenarioStorm, func() (err error) { rep.Storm, err = runStorm(ctx, e, cfg); return err }},
		{ScenarioSteady, func() (err error) { rep.Steady, err = runSteady(ctx, e, cfg, steadyRate(cfg, rep.HTTP)); return err }},
		{ScenarioMemory, func() (err error) { rep.Memory, err = runMemory(ctx, e, cfg); return err }},
		{ScenarioScaling, func() (err error) { rep.Scaling, err = runScaling(ctx, e, cfg); return err }},
		{ScenarioCapacity, func() (err error) { rep.Capacity, err = runCapacity(ctx, e, cfg); return err }},
		{ScenarioCycleOpen, func() (err error) { rep.CycleOpen, err = runCycleOpen(ctx, e, cfg); return err }},
		{ScenarioRetryBudget, func() (err error) { rep.RetryBudget, err = runRetryBudget(ctx, e, cfg); return err }},
		{ScenarioPartial, func() (err error) { rep.Partial, err = runPartial(ctx, e, cfg); return err }},
		{ScenarioOutage, func() (err error) { rep.Outage, err = runOutage(ctx, e, cfg); return err }},
		{ScenarioEngines, func() (err error) { rep.Engines, err = runEngines(ctx, e, cfg); return err }},
		{ScenarioAudit, func() (err error) { rep.Audit, err = runAudit(ctx, e, cfg); return err }},
		{ScenarioProcess, func() (err error) { rep.Process, err = runProcess(ctx, cfg); return err }},
	}
	for _, s := range steps {
		if !cfg.Runs(s.name) {
			continue
		}
		t0 := time.Now()
		if err := s.run(); err != nil {
			return rep, fmt.Errorf("bench %s: %w", s.name, err)
		}
		cfg.progress("%s done in %s", s.name, time.Since(t0).Round(100*time.Millisecond))
	}
	rep.Took = time.Since(rep.Started)
	return rep, nil
}

// steadyRate is cfg.SteadyRate, or 70% of the pipeline's HTTP rate, at most
// steadyRateCap.
func steadyRate(cfg Config, h *HTTPResult) int {
	switch {
	case cfg.SteadyRate > 0:
		return cfg.SteadyRate
	case h != nil:
		return max(1, min(steadyRateCap, int(h.Ours.MsgsPerSec*7/10)))
	}
	return steadyRateCap
}
