package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// Storm is a backlog of reads that all fail once with a 503, redelivered
// with the consumer's full jitter and with a fixed delay.
type Storm struct {
	N             int           `json:"n"`
	MaxAckPending int           `json:"max_ack_pending"`
	Band          time.Duration `json:"band_ns"`   // the jitter band, [0, Cap]
	Window        time.Duration `json:"window_ns"` // 100ms
	Jitter        StormVariant  `json:"full_jitter"`
	Fixed         StormVariant  `json:"fixed_delay"`
}

// StormVariant is how one way of delaying came back.
type StormVariant struct {
	Spread    Spread        `json:"redeliveries"`
	FirstPass time.Duration `json:"first_pass_ns"` // first to last failed call
	Drain     time.Duration `json:"drain_ns"`      // start to every read acked
}

const (
	stormDelay         = 2 * time.Second
	stormMaxAckPending = 20_000 // every read waiting out its delay holds MaxAckPending room
	spreadWindow       = 100 * time.Millisecond
)

// runStorm publishes cfg.StormN reads, which every variant drains on its own
// durable against its own rate engine, answering 503 to the first call of
// every key and 200 to the next: ours with full jitter, and the bare client
// with a fixed delay (what a JetStream BackOff gives).
func runStorm(ctx context.Context, e *env, cfg Config) (*Storm, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	last, err := publishBacklog(ctx, e.js, 0, cfg.StormN)
	if err != nil {
		return nil, err
	}
	out := &Storm{N: cfg.StormN, MaxAckPending: stormMaxAckPending, Band: stormDelay, Window: spreadWindow}
	policy := retry.Policy{Base: stormDelay, Cap: stormDelay, MaxAttempts: 6}
	for _, v := range []struct {
		name  string
		start func(url string) starter
		to    *StormVariant
	}{
		{"jitter", func(url string) starter {
			return ours(e, product{cfg: isolatedConfig(0, policy), url: url, seed: cfg.Seed})
		}, &out.Jitter},
		{"fixed", func(url string) starter {
			return bare(e, bareSpec{url: url, workers: httpConcurrency, pull: httpConcurrency, policy: policy, fixed: stormDelay})
		}, &out.Fixed},
	} {
		if *v.to, err = stormVariant(ctx, e, cfg.StormN, last, "storm-"+v.name, v.start); err != nil {
			return nil, fmt.Errorf("storm %s: %w", v.name, err)
		}
		cfg.progress("storm %s: peak/mean %.2f, first pass %s, drained in %s",
			v.name, v.to.Spread.PeakOverMean, v.to.FirstPass.Round(time.Millisecond), v.to.Drain.Round(time.Millisecond))
	}
	return out, nil
}

func stormVariant(ctx context.Context, e *env, n int, last uint64, durable string, start func(url string) starter) (StormVariant, error) {
	re, err := failingOnce(ctx, func(string) bool { return true })
	if err != nil {
		return StormVariant{}, err
	}
	defer re.Close()
	r, err := e.drainAll(ctx, durable, stormMaxAckPending, n, last, start(re.URL))
	if err != nil {
		return StormVariant{}, err
	}
	var firsts, seconds []time.Time
	for _, calls := range re.Ledger() {
		firsts = append(firsts, calls[0].At)
		if len(calls) >= 2 {
			seconds = append(seconds, calls[1].At)
		}
	}
	if len(seconds) != n {
		return StormVariant{}, fmt.Errorf("%d of %d reads were called twice", len(seconds), n)
	}
	return StormVariant{Spread: spreadOf(seconds, spreadWindow, windowsIn(stormDelay, spreadWindow)), Drain: r.elapsed,
		FirstPass: slices.MaxFunc(firsts, time.Time.Compare).Sub(slices.MinFunc(firsts, time.Time.Compare))}, nil
}

// failingOnce serves the storm's and the steady's engine: of unlimited
// capacity, answering 503 to the first call of a key fail selects and 200
// to the rest, keeping the calls of the keys fail selects and of no other.
func failingOnce(ctx context.Context, fail func(key string) bool) (*simengine.Server, error) {
	return serveEngine(ctx, simengine.Options{Keep: fail, Answer: func(key string, n int) (int, http.Header) {
		if n == 1 && fail(key) {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}})
}

func (s *Storm) rows() []Row {
	f, j := s.Fixed, s.Jitter
	return named(fmt.Sprintf("storm %d x 503", s.N),
		Row{Measure: "redeliveries: peak/mean per 100ms over the 2s band",
			Baseline: "fixed 2s " + ratio(f.Spread.PeakOverMean), Ours: "jitter " + ratio(j.Spread.PeakOverMean),
			Target: "ours <= 1.5, fixed >= 5", Met: met(j.Spread.PeakOverMean <= 1.5 && f.Spread.PeakOverMean >= 5)},
		Row{Measure: "busiest 100ms (mean)", Baseline: fmt.Sprintf("%d (%.0f)", f.Spread.Peak, f.Spread.Mean),
			Ours: fmt.Sprintf("%d (%.0f)", j.Spread.Peak, j.Spread.Mean)},
		Row{Measure: "first failed pass", Baseline: ms(f.FirstPass), Ours: ms(j.FirstPass)},
		Row{Measure: "time to drain", Baseline: ms(f.Drain), Ours: ms(j.Drain)})
}
