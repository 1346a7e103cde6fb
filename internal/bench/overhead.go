package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// Overhead compares the pipeline with a bare Consume loop that only acks.
type Overhead struct {
	N    int           `json:"n"`
	Rows []OverheadRow `json:"rows"`
}

// OverheadRow is one pull size: the bare loop, the fan-out and ours pull
// the same.
type OverheadRow struct {
	Pull    int  `json:"pull"`
	Breaker bool `json:"breaker"` // ours with the circuit breaker on (the binary's default)
	Bare    Rate `json:"bare"`
	// FanOutDecode is the bare loop handing each message to 32 goroutines
	// that parse its metadata and decode its read before the ack: the work
	// no consumer can skip. A diagnostic, not the baseline; zero in a report
	// saved before it was measured.
	FanOutDecode Rate    `json:"fan_out_decode"`
	Ours         Rate    `json:"ours"`
	Ratio        float64 `json:"ratio"` // ours / bare msgs/s
}

// runOverhead publishes cfg.N reads once, then for each row drains them on
// fresh durables in the order bare, fan-out decoding, ours, twice,
// keeping the best of two for each.
func runOverhead(ctx context.Context, e *env, cfg Config) (*Overhead, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	last, err := publishBacklog(ctx, e.js, 0, cfg.N)
	if err != nil {
		return nil, err
	}
	out := &Overhead{N: cfg.N}
	for _, p := range cfg.Pulls {
		out.Rows = append(out.Rows, OverheadRow{Pull: p})
	}
	out.Rows = append(out.Rows, OverheadRow{Pull: cfg.Pulls[0], Breaker: true})
	for i := range out.Rows {
		row := &out.Rows[i]
		pc := isolatedConfig(row.Pull, retry.Policy{})
		pc.Breaker.Enabled = row.Breaker // with the binary's defaults
		variants := []struct {
			name  string
			start starter
			to    *Rate
		}{
			{sideBare, bare(e, bareSpec{pull: row.Pull}), &row.Bare},
			{sideFanOutDecode, bare(e, bareSpec{side: sideFanOutDecode, pull: row.Pull, workers: httpConcurrency, decode: true}), &row.FanOutDecode},
			{"ours", ours(e, product{cfg: pc}), &row.Ours},
		}
		runs := make([][]pass, len(variants))
		for round := range 2 {
			for j, v := range variants {
				r, err := e.drainAll(ctx, fmt.Sprintf("%s-%d-%d", v.name, i, round), 0, cfg.N, last, v.start)
				if err != nil {
					return nil, err
				}
				runs[j] = append(runs[j], r)
			}
		}
		for j, v := range variants {
			*v.to = best(cfg.N, runs[j])
		}
		row.Ratio = row.Ours.MsgsPerSec / row.Bare.MsgsPerSec
		cfg.progress("overhead pull %d breaker %t: bare %.0f/s, fan-out decoding %.0f/s, ours %.0f/s, ratio %.2f",
			row.Pull, row.Breaker, row.Bare.MsgsPerSec, row.FanOutDecode.MsgsPerSec, row.Ours.MsgsPerSec, row.Ratio)
	}
	return out, nil
}

func (o *Overhead) rows() []Row {
	var rows []Row
	for _, x := range o.Rows {
		name := fmt.Sprintf("overhead pull %d", x.Pull)
		if x.Breaker {
			name += " +breaker"
		}
		add := func(r Row) { rows = append(rows, named(name, r)...) }
		ours, bare, d := rate(x.Ours.MsgsPerSec), "bare "+rate(x.Bare.MsgsPerSec), x.FanOutDecode
		add(Row{Measure: "msgs/s, best of 2", Baseline: bare, Ours: ours, Ratio: ratio(x.Ratio), Target: ">= 0.85", Met: met(x.Ratio >= 0.85)})
		add(Row{Measure: "process CPU/msg (server incl.)", Baseline: micros(x.Bare.CPUMicros), Ours: micros(x.Ours.CPUMicros),
			Ratio: ratio(x.Ours.CPUMicros / x.Bare.CPUMicros)})
		if d.MsgsPerSec > 0 {
			add(Row{Measure: "vs the fan-out decoding (32 goroutines that parse each message's metadata and decode its read, then ack)", Baseline: "fan-out decoding " + rate(d.MsgsPerSec) + ", " + micros(d.CPUMicros),
				Ours: ours, Ratio: ratio(x.Ours.MsgsPerSec / d.MsgsPerSec)})
			add(Row{Measure: "the fan-out decoding vs the bare loop (the cost of the work no consumer skips)", Baseline: bare,
				Ours: "fan-out decoding " + rate(d.MsgsPerSec), Ratio: ratio(d.MsgsPerSec / x.Bare.MsgsPerSec)})
		}
		if max(x.Bare.Stall, d.Stall, x.Ours.Stall) >= time.Second {
			add(Row{Measure: "longest ack-floor stall in a run", Ours: ms(x.Ours.Stall),
				Baseline: fmt.Sprintf("bare %s, fan-out decoding %s", ms(x.Bare.Stall), ms(d.Stall))})
		}
	}
	return rows
}
