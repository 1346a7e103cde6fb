package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// Outage is fleets with the production options draining a backlog from
// an engine that is down (every call 503) for Down from its first call,
// then serves at once: what the outage costs in calls, whether any read
// pays for it in the dead-letter stream, and how long the fleet takes to
// bill the backlog once the engine is back.
type Outage struct {
	N    int           `json:"n"`
	Down time.Duration `json:"down_ns"`
	Rows []OutageRow   `json:"rows"`
}

// OutageRow is one fleet size.
type OutageRow struct {
	Replicas int `json:"replicas"`
	// DownCalls are the calls the engine answered 503 while down.
	DownCalls int64 `json:"down_calls"`
	// Recovery is from the engine's return to the last read settled.
	Recovery time.Duration `json:"recovery_ns"`
	Run      FleetRun      `json:"run"`
}

// runOutage drains cfg.OutageN reads with fleets of 1 and 4 replicas
// (those of cfg.Replicas up to 4) from an engine down for cfg.OutageFor.
func runOutage(ctx context.Context, e *env, cfg Config) (*Outage, error) {
	out := &Outage{N: cfg.OutageN, Down: cfg.OutageFor}
	for _, replicas := range cfg.Replicas {
		if replicas > 4 {
			continue
		}
		var (
			once   sync.Once
			down   atomic.Bool
			downN  atomic.Int64
			healed atomic.Int64 // unix ns
		)
		down.Store(true)
		eng, err := simengine.New(simengine.Options{
			ServiceTime: time.Millisecond,
			Answer: func(string, int) (int, http.Header) {
				once.Do(func() {
					time.AfterFunc(out.Down, func() { healed.Store(time.Now().UnixNano()); down.Store(false) })
				})
				if down.Load() {
					downN.Add(1)
					return http.StatusServiceUnavailable, nil
				}
				return http.StatusOK, nil
			},
		})
		if err != nil {
			return nil, err
		}
		var srv *simengine.Server
		labelled(ctx, sideDownstream, func(context.Context) { srv = simengine.NewServer(eng) })
		run, err := drainBacklog(ctx, e, srv, out.N, out.Down+cfg.FleetSlack+time.Minute, fmt.Sprintf("outage-%d", replicas),
			fleetSpec{replicas: replicas, adaptive: true, seed: cfg.Seed + 11})
		srv.Close()
		if err != nil {
			return nil, fmt.Errorf("%d replicas: %w", replicas, err)
		}
		row := OutageRow{Replicas: replicas, DownCalls: downN.Load(), Run: run}
		if h := healed.Load(); h != 0 && run.Drained {
			row.Recovery = run.started.Add(run.Elapsed).Sub(time.Unix(0, h))
		}
		out.Rows = append(out.Rows, row)
		cfg.progress("outage %d replicas: %d calls while down %s, drained %t, %d dead-lettered, breaker opened %d, billed %s after the engine was back",
			replicas, row.DownCalls, out.Down, run.Drained, run.deadLettered(), run.BreakerOpened, row.Recovery.Round(time.Millisecond))
	}
	return out, nil
}

// rows are the outage's table rows.
func (o *Outage) rows() []Row {
	var rows []Row
	for _, r := range o.Rows {
		name := fmt.Sprintf("outage %d replica(s), %d reads, down %s", r.Replicas, o.N, o.Down)
		rows = append(rows,
			Row{Scenario: name, Measure: "calls while down; breaker opened", Ours: fmt.Sprintf("%d; %d", r.DownCalls, r.Run.BreakerOpened)},
			Row{Scenario: name, Measure: "dead-lettered; billed", Ours: fmt.Sprintf("%d; %d of %d", r.Run.deadLettered(), r.Run.Billed, o.N),
				Target: "0 dead-lettered, all billed", Met: met(r.Run.Drained && r.Run.deadLettered() == 0 && r.Run.Billed >= int64(o.N))},
			Row{Scenario: name, Measure: "billed all after the engine was back", Ours: ms(r.Recovery)})
	}
	return rows
}
