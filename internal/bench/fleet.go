package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// maxReplicas bounds a fleet: each replica is a connection, 32 workers and
// an HTTP transport in this process.
const maxReplicas = 64

// replicaConfig is a replica's configuration: the binary's defaults, the
// retry policy given (when set), and the bench's 10s stop.
func replicaConfig(policy retry.Policy) config.Config {
	cfg := config.Default()
	if policy != (retry.Policy{}) {
		cfg.Retry.Base, cfg.Retry.Cap, cfg.Retry.MaxAttempts, cfg.Retry.MaxServerWait = policy.Base, policy.Cap, policy.MaxAttempts, policy.MaxServerWait
	}
	cfg.Shutdown.Timeout = 10 * time.Second
	return cfg
}

// fleetSpec is a fleet of replicas on one durable, each an independent
// pipeline built as the binary builds it (service.Pipeline): its own
// connection, HTTP sink, breaker, records, limit and retry budget.
type fleetSpec struct {
	replicas int
	url      string
	seed     uint64
	policy   retry.Policy // when set, replaces the defaults' retry policy
	log      slog.Handler // when set, gets each replica's log records instead of the JSON logger writing nowhere
	trace    *tracer      // when set, gets the fleet's timeline
}

// fleet is a running fleet.
type fleet struct {
	*running
	mu       sync.Mutex // limiters grows while the fleet starts, sampled by the trace
	limiters []*limit.Limiter
	regs     []*prometheus.Registry
}

// startFleet starts spec's fleet on durable.
func startFleet(ctx context.Context, e *env, durable string, spec fleetSpec) (*fleet, error) {
	f := &fleet{}
	var rs []*running
	traced := spec.trace.follow(f)
	for i := range spec.replicas {
		p := product{cfg: replicaConfig(spec.policy), url: spec.url, log: spec.log, seed: spec.seed + uint64(i), records: true}
		c, err := p.start(ctx, e, durable, fmt.Sprintf("bench-replica-%d", i))
		if err != nil {
			traced()
			return nil, errors.Join(err, stopAll(rs).stop())
		}
		rs = append(rs, c.running)
		f.regs = append(f.regs, c.registry)
		f.mu.Lock()
		f.limiters = append(f.limiters, c.limiter)
		f.mu.Unlock()
	}
	all := stopAll(rs)
	f.running = &running{ended: all.ended, stop: func() error { traced(); return all.stop() }}
	return f, nil
}

// limits are the replicas' limits now, of those started.
func (f *fleet) limits() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	ls := make([]int, len(f.limiters))
	for i, l := range f.limiters {
		ls[i] = l.Limit()
	}
	return ls
}

// counter sums the counter or gauge meter_consumer_<name> over every
// replica, of the samples with each label of labels (name, value pairs).
func (f *fleet) counter(name string, labels ...string) int {
	var sum float64
	for _, reg := range f.regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			if mf.GetName() != "meter_consumer_"+name {
				continue
			}
			for _, m := range mf.GetMetric() {
				have := map[string]string{}
				for _, lp := range m.GetLabel() {
					have[lp.GetName()] = lp.GetValue()
				}
				ok := true
				for i := 0; i+1 < len(labels); i += 2 {
					ok = ok && have[labels[i]] == labels[i+1]
				}
				if ok {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return int(sum)
}

// diagnostics are the fleet's FleetRun.Diagnostics.
func (f *fleet) diagnostics() map[string]int {
	out := map[string]int{}
	add := func(key, name string, labels ...string) {
		if n := f.counter(name, labels...); n > 0 {
			out[key] = n
		}
	}
	for _, why := range []string{"breaker", "shedding", "engine_down", "trial"} {
		add("uncharged_"+why, "uncharged_failures_total", "why", why)
	}
	for _, op := range []string{"get", "put"} {
		add("record_errors_"+op, "record_errors_total", "op", op)
	}
	add("dips", "engine_dips_total")
	for _, v := range []string{"load", "own"} {
		add("trials_"+v, "engine_trials_total", "verdict", v)
	}
	add("leases_lost", "leases_lost_total")
	add("hand_backs", "hand_backs_total")
	add("settle_errors", "settle_errors_total")
	return out
}

// seeded is a math/rand source seeded from seed and salt, for an engine.
func seeded(seed, salt uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, salt)) }

// traceEvery is how often a traced fleet is sampled.
const traceEvery = 5 * time.Millisecond

// tracer writes a fleet's timeline (Config.EnginesTrace), a tab-separated
// line every traceEvery from its first replica's start until it stops: the
// cell, the milliseconds since, the engine's calls and sheds so far, and
// each started replica's limit. It shows how a fleet finds an engine's
// room, which the cell's totals do not.
type tracer struct {
	w     io.Writer
	cell  string
	stats func() simengine.Stats
}

// follow samples f until the function it returns is called; a nil tracer
// samples nothing.
func (t *tracer) follow(f *fleet) (stop func()) {
	if t == nil {
		return func() {}
	}
	start := time.Now()
	return every(traceEvery, func() {
		st := t.stats()
		fmt.Fprintf(t.w, "%s\t%d\t%d\t%d\t%v\n", t.cell, time.Since(start).Milliseconds(), st.Calls, st.Shed, f.limits())
	})
}

// every calls sample every d in a goroutine of its own until the function
// it returns is called (once or more), which waits for it.
func every(d time.Duration, sample func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return sync.OnceFunc(func() { close(quit); <-done })
}
