package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// Steady is a steady publish rate of which 20% of the reads (by key hash)
// fail once, redelivered by the consumer (held in process, plain NAK when
// due) and by the naive variant (NakWithDelay at once).
type Steady struct {
	Rate       int           `json:"rate_per_sec"`
	For        time.Duration `json:"for_ns"`
	Published  int           `json:"published"`
	Policy     string        `json:"policy"`
	Held       SteadyVariant `json:"held"`
	ServerSide SteadyVariant `json:"server_side"`
}

// SteadyVariant is how the failed reads of one variant came back.
type SteadyVariant struct {
	Failed  int         `json:"failed"`  // reads that failed once
	Missing int         `json:"missing"` // failed reads without a second call or an asked delay
	Spread  Spread      `json:"redeliveries"`
	Late    Percentiles `json:"lateness"` // second call - first call - asked delay
}

const steadyMaxAckPending = 20_000

// failsOnce selects 20% of the keys.
func failsOnce(key string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()%5 == 0
}

func runSteady(ctx context.Context, e *env, cfg Config) (*Steady, error) {
	rate := cfg.SteadyRate
	out := &Steady{Rate: rate, For: cfg.SteadyFor, Policy: "retry defaults: base 500ms, cap 30s (first retry in [0, 500ms])"}
	for _, v := range []struct {
		name       string
		serverSide bool
		to         *SteadyVariant
	}{{"held", false, &out.Held}, {"server-side", true, &out.ServerSide}} {
		var err error
		if *v.to, out.Published, err = steadyVariant(ctx, e, cfg.SteadyFor, rate, v.serverSide); err != nil {
			return nil, fmt.Errorf("steady %s: %w", v.name, err)
		}
		cfg.progress("steady %s: peak/mean %.2f, lateness p50 %s p99 %s", v.name, v.to.Spread.PeakOverMean,
			v.to.Late.P50.Round(time.Microsecond), v.to.Late.P99.Round(time.Microsecond))
	}
	return out, nil
}

func steadyVariant(ctx context.Context, e *env, d time.Duration, rate int, serverSide bool) (SteadyVariant, int, error) {
	re, err := failingOnce(ctx, failsOnce)
	if err != nil {
		return SteadyVariant{}, 0, err
	}
	defer re.Close()
	naks := newNakCapture()
	start := ours(e, product{cfg: isolatedConfig(0, retry.Policy{}), url: re.URL, log: naks})
	if serverSide {
		start = bareRetrier(e, bareSpec{url: re.URL, policy: config.Default().Retry.Policy(), rnd: retry.NewRand(uint64(time.Now().UnixNano())),
			naks: naks, gaveUp: newSeqSet()})
	}
	var seqs []uint64
	p, err := e.drive(ctx, re, traffic{pending: steadyMaxAckPending, then: trickle(rate, d, &seqs)}, d+time.Minute, "steady", start)
	switch {
	case err != nil:
		return SteadyVariant{}, 0, err
	case len(seqs) == 0:
		return SteadyVariant{}, 0, errors.New("nothing published")
	case !p.drained:
		return SteadyVariant{}, 0, fmt.Errorf("not every read acked in %s", d+time.Minute)
	}
	return steadyOutcome(re.Ledger(), seqs, naks), len(seqs), nil
}

// steadyOutcome measures the redeliveries of the failed reads against the
// band they were due in: from the earliest to the latest first call plus
// its asked delay.
func steadyOutcome(ledger map[string][]simengine.Call, seqs []uint64, naks *nakCapture) SteadyVariant {
	var v SteadyVariant
	var seconds []time.Time
	var late []time.Duration
	var firstDue, lastDue time.Time
	for key, calls := range ledger {
		if !failsOnce(key) {
			continue
		}
		v.Failed++
		i, ok := Index(key)
		if !ok || i >= len(seqs) || len(calls) < 2 {
			v.Missing++
			continue
		}
		all := naks.all(seqs[i])
		if len(all) == 0 {
			v.Missing++
			continue
		}
		asked := all[len(all)-1].delay
		first, second := calls[0].At, calls[1].At
		due := first.Add(asked)
		if len(seconds) == 0 || due.Before(firstDue) {
			firstDue = due
		}
		if len(seconds) == 0 || due.After(lastDue) {
			lastDue = due
		}
		seconds = append(seconds, second)
		late = append(late, second.Sub(first)-asked)
	}
	v.Spread = spreadOf(seconds, spreadWindow, windowsIn(lastDue.Sub(firstDue), spreadWindow))
	v.Late = percentilesOf(late)
	return v
}
