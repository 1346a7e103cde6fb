package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// RetryBudget is one replica draining a backlog of which a fifth of the
// reads fail once with a 500 (transient, and no sign of overload: the
// adaptive limit does not move), with the production options (the adaptive
// limit and the retry budget on) and with the budget off: how long the
// retries the budget holds take to come out, and the MaxAckPending room
// they hold meanwhile.
type RetryBudget struct {
	N           int           `json:"n"`
	FailShare   float64       `json:"fail_share"`      // of the reads, failing their first call
	ServiceTime time.Duration `json:"service_time_ns"` // the engine's, with no limit on its servers
	Longest     time.Duration `json:"deadline_ns"`
	Budget      FleetRun      `json:"budget"`
	NoBudget    FleetRun      `json:"no_budget"`
}

// left is how many reads were not billed by the deadline.
func (r RetryBudget) left(v FleetRun) int64 { return int64(r.N) - v.Billed }

// runRetryBudget drains cfg.CapacityN reads, a fifth failing their first
// call, against an engine of unlimited servers of 6ms: the first attempts
// take a few seconds, so the retries are due while the first attempts
// last, and after them.
func runRetryBudget(ctx context.Context, e *env, cfg Config) (*RetryBudget, error) {
	out := &RetryBudget{N: cfg.CapacityN, FailShare: 0.2, ServiceTime: capacityEngine.ServiceTime, Longest: cfg.FleetSlack}
	for _, v := range []struct {
		noBudget bool
		to       *FleetRun
	}{{false, &out.Budget}, {true, &out.NoBudget}} {
		eng, err := simengine.New(simengine.Options{
			ServiceTime: out.ServiceTime,
			Answer: func(key string, n int) (int, http.Header) {
				if n == 1 && failsOnce(key) {
					return http.StatusInternalServerError, nil
				}
				return http.StatusOK, nil
			},
		})
		if err != nil {
			return nil, err
		}
		var srv *simengine.Server
		labelled(ctx, sideDownstream, func(context.Context) { srv = simengine.NewServer(eng) })
		*v.to, err = drainBacklog(ctx, e, srv, out.N, out.Longest, fmt.Sprintf("budget-%t", !v.noBudget),
			fleetSpec{replicas: 1, adaptive: true, noBudget: v.noBudget, seed: cfg.Seed + 7})
		srv.Close()
		if err != nil {
			return nil, fmt.Errorf("budget %t: %w", !v.noBudget, err)
		}
		x := *v.to
		cfg.progress("retry-budget %t: drained %t in %s, %d reads left, retries spent %d denied %d, peak ack pending %d",
			!v.noBudget, x.Drained, x.Elapsed.Round(time.Millisecond), out.left(x), x.RetriesSpent, x.RetriesDenied, x.PeakAckPending)
	}
	return out, nil
}
