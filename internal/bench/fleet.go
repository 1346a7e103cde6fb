package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
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
	// policy, when set, replaces the retry policy of the defaults; log,
	// when set, receives each replica's log records (at the levels it
	// enables) instead of the JSON logger writing nowhere.
	policy retry.Policy
	log    slog.Handler
	// trace, when set, gets a line every traceEvery from the first
	// replica's start until the fleet stops: the milliseconds since, the
	// engine's calls and sheds (stats) and each replica's limit.
	trace *tracer
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
		p := product{cfg: replicaConfig(spec.policy), url: spec.url, log: spec.log, rand: retry.NewRand(spec.seed + uint64(i)), records: true}
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

// limitSum is the fleet's calls allowed in flight now: the sum of its
// limits.
func (f *fleet) limitSum() int {
	sum := 0
	for _, l := range f.limits() {
		sum += l
	}
	return sum
}

// counter sums the samples of the counter or gauge meter_consumer_<name>
// whose labels include want, over every replica.
func (f *fleet) counter(name string, want map[string]string) float64 {
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
		metrics:
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				for k, v := range want {
					if labels[k] != v {
						continue metrics
					}
				}
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func median(v []int) int {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// seeded is a math/rand source seeded from seed and salt, for an engine.
func seeded(seed, salt uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, salt)) }

// diagnostics returns the fleet's sums of the counters that explain a
// read's calls beyond its attempts, those not zero (see
// FleetRun.Diagnostics).
func (f *fleet) diagnostics() map[string]int {
	out := map[string]int{}
	add := func(key, name string, want map[string]string) {
		if n := int(f.counter(name, want)); n > 0 {
			out[key] = n
		}
	}
	for _, why := range []string{"breaker", "shedding", "engine_down"} {
		add("uncharged_"+why, "uncharged_failures_total", map[string]string{"why": why})
	}
	for _, op := range []string{"get", "put"} {
		add("record_errors_"+op, "record_errors_total", map[string]string{"op": op})
	}
	add("leases_lost", "leases_lost_total", nil)
	add("hand_backs", "hand_backs_total", nil)
	add("settle_errors", "settle_errors_total", nil)
	return out
}
