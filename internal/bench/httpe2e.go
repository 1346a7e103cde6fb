package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/stream"
)

// HTTPResult compares the pipeline posting to a loopback rate engine with a
// bare Go HTTP client posting the same bodies to it.
type HTTPResult struct {
	N           int  `json:"n"`
	Concurrency int  `json:"concurrency"`
	Bare        Rate `json:"bare"`
	// Ours runs the production options: the adaptive limit and the retry
	// budget on, the breaker on.
	Ours Rate `json:"ours"`
	// Fixed is ours with the limit and the budget off (32 calls at once), a
	// diagnostic: the limit's own cost against a healthy engine.
	Fixed      Rate    `json:"fixed"`
	Ratio      float64 `json:"ratio"`       // Ours / Bare msgs/s
	FixedRatio float64 `json:"fixed_ratio"` // Fixed / Bare msgs/s
	// Limit is the adaptive limit when ours' best run ended.
	Limit int `json:"limit"`
}

// httpConcurrency is the calls in flight of the HTTP sink and of the bare
// posters compared with it: the binary's consumer.concurrency.
var httpConcurrency = config.Default().Consumer.Concurrency

// httpRounds is how many times each variant drains the backlog; the best
// run counts.
const httpRounds = 3

// runHTTP drains cfg.N/2 reads (HTTP is several times slower than the
// overhead scenario) through the HTTP sink, with the adaptive limit and
// without, and posts the same normalised bodies with 32 bare goroutines,
// alternating, best of three.
func runHTTP(ctx context.Context, e *env, cfg Config) (*HTTPResult, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	n := max(1, cfg.N/2)
	last, err := publishBacklog(ctx, e.js, 0, n)
	if err != nil {
		return nil, err
	}
	bodies, keys := make([][]byte, n), make([]string, n)
	for i := range n {
		if bodies[i], keys[i], err = Normalised(i); err != nil {
			return nil, fmt.Errorf("read %d: %w", i, err)
		}
	}
	var re *rateEngine
	labelled(ctx, sideDownstream, func(context.Context) { re, err = startRateEngine(nil) })
	if err != nil {
		return nil, err
	}
	defer re.close()

	var bareRuns, ourRuns, fixedRuns []run
	var limitAt []int
	for round := range httpRounds {
		before := re.calls()
		r, err := timeRun(n, func() error { return postAll(ctx, re.URL, bodies, keys) })
		if err != nil {
			return nil, fmt.Errorf("bare http: %w", err)
		}
		if got := re.calls() - before; got != int64(n) {
			return nil, fmt.Errorf("bare http: the rate engine saw %d calls, want %d", got, n)
		}
		bareRuns = append(bareRuns, r)

		for _, adaptive := range []bool{true, false} {
			durable := fmt.Sprintf("http-%d-%t", round, adaptive)
			topo := e.topo
			topo.Durable = durable
			var lim *limit.Limiter
			before = re.calls()
			r, err = e.drain(ctx, durable, 0, n, last, ours(e, 1, func(js jetstream.JetStream) (stream.Options, error) {
				sink, err := httpSink(re.URL)
				if err != nil {
					return stream.Options{}, err
				}
				var o stream.Options
				o, lim, err = productionOptions(ctx, js, topo, sink, prometheus.NewRegistry(), adaptive, cfg.Seed+uint64(round))
				return o, err
			}))
			if err != nil {
				return nil, err
			}
			if got := re.calls() - before; got < int64(n) {
				return nil, fmt.Errorf("pipeline http: the rate engine saw %d calls, want %d", got, n)
			}
			if adaptive {
				ourRuns = append(ourRuns, r)
				limitAt = append(limitAt, lim.Limit())
			} else {
				fixedRuns = append(fixedRuns, r)
			}
		}
	}
	out := &HTTPResult{N: n, Concurrency: httpConcurrency, Bare: best(bareRuns), Ours: best(ourRuns), Fixed: best(fixedRuns)}
	out.Ratio = out.Ours.MsgsPerSec / out.Bare.MsgsPerSec
	out.FixedRatio = out.Fixed.MsgsPerSec / out.Bare.MsgsPerSec
	out.Limit = limitAt[bestIndex(ourRuns)]
	cfg.progress("http: bare %.0f/s, ours %.0f/s (limit %d), limit off %.0f/s, ratio %.2f (limit off %.2f); runs bare %.0f, ours %.0f, limit off %.0f",
		out.Bare.MsgsPerSec, out.Ours.MsgsPerSec, out.Limit, out.Fixed.MsgsPerSec, out.Ratio, out.FixedRatio,
		out.Bare.Runs, out.Ours.Runs, out.Fixed.Runs)
	return out, nil
}

// postAll posts every body with httpConcurrency goroutines sharing one
// client; it stops at the first error.
func postAll(ctx context.Context, url string, bodies [][]byte, keys []string) error {
	p := newPoster(url, httpConcurrency)
	defer p.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, httpConcurrency)
	labelled(ctx, sideBare, func(ctx context.Context) {
		for range httpConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < len(bodies) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
					status, err := p.post(ctx, bodies[i], keys[i])
					if err == nil && status != 200 {
						err = fmt.Errorf("status %d", status)
					}
					if err != nil {
						errs <- err
						cancel()
						return
					}
				}
			}()
		}
	})
	wg.Wait()
	close(errs)
	return <-errs
}
