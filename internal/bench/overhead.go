package bench

import (
	"context"
	"fmt"

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
	// FanOut is the bare loop handing each message to 32 goroutines that
	// only ack: a diagnostic, not the baseline.
	FanOut Rate `json:"fan_out"`
	// FanOutDecode is the fan-out whose goroutines also parse each
	// message's metadata and decode its read before the ack: the work no
	// consumer can skip. A diagnostic, not the baseline; zero in a report
	// saved before it was measured.
	FanOutDecode Rate    `json:"fan_out_decode"`
	Ours         Rate    `json:"ours"`
	Ratio        float64 `json:"ratio"` // ours / bare msgs/s
}

// runOverhead publishes cfg.N reads once, then for each row drains them on
// fresh durables in the order bare, fan-out, fan-out with decoding, ours,
// twice, keeping the best of two for each.
func runOverhead(ctx context.Context, e *env, cfg Config) (*Overhead, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	last, err := publishBacklog(ctx, e.js, 0, cfg.N)
	if err != nil {
		return nil, err
	}
	out := &Overhead{N: cfg.N}
	rows := make([]OverheadRow, 0, len(cfg.Pulls)+1)
	for _, p := range cfg.Pulls {
		rows = append(rows, OverheadRow{Pull: p})
	}
	rows = append(rows, OverheadRow{Pull: cfg.Pulls[0], Breaker: true})
	for i, row := range rows {
		var bareRuns, fanRuns, decodeRuns, ourRuns []run
		for round := range 2 {
			r, err := e.drain(ctx, fmt.Sprintf("bare-%d-%d", i, round), 0, cfg.N, last, bare(e, row.Pull))
			if err != nil {
				return nil, err
			}
			bareRuns = append(bareRuns, r)
			if r, err = e.drain(ctx, fmt.Sprintf("fanout-%d-%d", i, round), 0, cfg.N, last, fanOut(e, row.Pull)); err != nil {
				return nil, err
			}
			fanRuns = append(fanRuns, r)
			if r, err = e.drain(ctx, fmt.Sprintf("fanout-decode-%d-%d", i, round), 0, cfg.N, last, fanOutDecoding(e, row.Pull)); err != nil {
				return nil, err
			}
			decodeRuns = append(decodeRuns, r)
			pc := isolatedConfig(row.Pull, retry.Policy{})
			pc.Breaker.Enabled = row.Breaker // with the binary's defaults
			r, err = e.drain(ctx, fmt.Sprintf("ours-%d-%d", i, round), 0, cfg.N, last, ours(e, product{cfg: pc}))
			if err != nil {
				return nil, err
			}
			ourRuns = append(ourRuns, r)
		}
		row.Bare, row.FanOut, row.FanOutDecode, row.Ours = best(bareRuns), best(fanRuns), best(decodeRuns), best(ourRuns)
		row.Ratio = row.Ours.MsgsPerSec / row.Bare.MsgsPerSec
		out.Rows = append(out.Rows, row)
		cfg.progress("overhead pull %d breaker %t: bare %.0f/s, fan-out %.0f/s, fan-out decoding %.0f/s, ours %.0f/s, ratio %.2f",
			row.Pull, row.Breaker, row.Bare.MsgsPerSec, row.FanOut.MsgsPerSec, row.FanOutDecode.MsgsPerSec, row.Ours.MsgsPerSec, row.Ratio)
	}
	return out, nil
}
