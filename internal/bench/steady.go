package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// Steady is a steady publish rate of which 20% of the reads (by key hash)
// fail once, redelivered by the consumer (held in process, plain NAK when
// due) and by the bare client (NakWithDelay at once).
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
	out := &Steady{Rate: cfg.SteadyRate, For: cfg.SteadyFor, Policy: "retry defaults: base 500ms, cap 30s (first retry in [0, 500ms])"}
	for _, v := range []struct {
		name       string
		serverSide bool
		to         *SteadyVariant
	}{{"held", false, &out.Held}, {"server-side", true, &out.ServerSide}} {
		var err error
		if *v.to, out.Published, err = steadyVariant(ctx, e, cfg, v.serverSide); err != nil {
			return nil, fmt.Errorf("steady %s: %w", v.name, err)
		}
		cfg.progress("steady %s: peak/mean %.2f, lateness p50 %s p99 %s", v.name, v.to.Spread.PeakOverMean,
			v.to.Late.P50.Round(time.Microsecond), v.to.Late.P99.Round(time.Microsecond))
	}
	return out, nil
}

func steadyVariant(ctx context.Context, e *env, cfg Config, serverSide bool) (SteadyVariant, int, error) {
	d, rate := cfg.SteadyFor, cfg.SteadyRate
	re, err := failingOnce(ctx, failsOnce)
	if err != nil {
		return SteadyVariant{}, 0, err
	}
	defer re.Close()
	naks := newNakCapture()
	start := ours(e, product{cfg: isolatedConfig(0, retry.Policy{}), url: re.URL, log: naks, seed: cfg.Seed})
	if serverSide {
		start = bare(e, bareSpec{url: re.URL, workers: httpConcurrency, policy: config.Default().Retry.Policy(), rnd: retry.NewRand(cfg.Seed), naks: naks})
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
	var seconds, dues []time.Time
	var late []time.Duration
	for key, calls := range ledger {
		if !failsOnce(key) {
			continue
		}
		v.Failed++
		var all []asked
		if i, ok := Index(key); ok && i < len(seqs) {
			all = naks.all(seqs[i])
		}
		if len(calls) < 2 || len(all) == 0 {
			v.Missing++
			continue
		}
		asked := all[len(all)-1].delay
		seconds = append(seconds, calls[1].At)
		dues = append(dues, calls[0].At.Add(asked))
		late = append(late, calls[1].At.Sub(calls[0].At)-asked)
	}
	var band time.Duration
	if len(dues) > 0 {
		band = slices.MaxFunc(dues, time.Time.Compare).Sub(slices.MinFunc(dues, time.Time.Compare))
	}
	v.Spread = spreadOf(seconds, spreadWindow, windowsIn(band, spreadWindow))
	v.Late = percentilesOf(late)
	return v
}

func (s *Steady) rows() []Row {
	b, o := s.ServerSide, s.Held
	return named(fmt.Sprintf("steady %d/s, 20%% fail once", s.Rate),
		Row{Measure: "redeliveries: peak/mean per 100ms over the due band",
			Baseline: "NakWithDelay " + ratio(b.Spread.PeakOverMean), Ours: "held " + ratio(o.Spread.PeakOverMean),
			Target: "ours <= 2", Met: met(o.Spread.PeakOverMean <= 2)},
		Row{Measure: "lateness p50", Baseline: ms(b.Late.P50), Ours: ms(o.Late.P50)},
		Row{Measure: "lateness p99", Baseline: ms(b.Late.P99), Ours: ms(o.Late.P99), Target: "ours <= 100 ms", Met: met(o.Late.P99 <= 100*time.Millisecond)},
		Row{Measure: "failed reads measured (missing)",
			Baseline: fmt.Sprintf("%d (%d)", b.Failed, b.Missing), Ours: fmt.Sprintf("%d (%d)", o.Failed, o.Missing)})
}
