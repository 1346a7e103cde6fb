package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// Report is everything one run measured.
type Report struct {
	Started   time.Time     `json:"started"`
	Took      time.Duration `json:"took_ns"`
	GoVersion string        `json:"go_version"`
	CPUs      int           `json:"cpus"`
	Config    Config        `json:"config"` // what ran, without its writers and binaries

	Overhead *Overhead `json:"overhead,omitempty"`
	Storm    *Storm    `json:"storm,omitempty"`
	Steady   *Steady   `json:"steady,omitempty"`
	Engines  *Engines  `json:"engines,omitempty"`
	Process  *Process  `json:"process,omitempty"`
}

// Run runs the scenarios cfg selects, in order, stopping at the first error.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep = &Report{Started: time.Now(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Config: cfg}
	if len(rep.Config.Scenarios) == 0 {
		rep.Config.Scenarios = Scenarios()
	}
	// The process scenario runs a nats-server process of its own: alone, it
	// needs no in-process server idling beside its engine.
	var e *env
	if slices.ContainsFunc(rep.Config.Scenarios, func(s string) bool { return s != ScenarioProcess }) {
		dir, derr := os.MkdirTemp("", "meter-bench-*")
		if derr != nil {
			return nil, fmt.Errorf("bench: store dir: %w", derr)
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
		var srv *server.Server
		labelled(ctx, sideServer, func(context.Context) { srv, err = natstest.Serve(natstest.Options(dir)) })
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		if e, err = newEnv(srv.ClientURL()); err != nil {
			return nil, err
		}
		defer e.close()
	}

	steps := []struct {
		name string
		run  func() error
	}{
		{ScenarioOverhead, func() (err error) { rep.Overhead, err = runOverhead(ctx, e, cfg); return err }},
		{ScenarioStorm, func() (err error) { rep.Storm, err = runStorm(ctx, e, cfg); return err }},
		{ScenarioSteady, func() (err error) { rep.Steady, err = runSteady(ctx, e, cfg); return err }},
		{ScenarioEngines, func() (err error) { rep.Engines, err = runEngines(ctx, e, cfg); return err }},
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
