package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// runStorm publishes cfg.StormN reads; the rate engine answers 503 to the
// first call of every key and 200 to the next. Each variant drains them on
// its own durable against its own rate engine.
func runStorm(ctx context.Context, e *env, cfg Config) (*Storm, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	last, err := publishBacklog(ctx, e.js, 0, cfg.StormN)
	if err != nil {
		return nil, err
	}
	out := &Storm{N: cfg.StormN, MaxAckPending: stormMaxAckPending, Band: stormDelay, Window: spreadWindow}
	jitter := func(url string) starter {
		pc := isolatedConfig(0, retry.Policy{Base: stormDelay, Cap: stormDelay, MaxAttempts: 6})
		return ours(e, product{cfg: pc, url: url})
	}
	fixed := func(url string) starter {
		return bareRetrier(e, bareSpec{url: url, policy: retry.Policy{Base: stormDelay, Cap: stormDelay, MaxAttempts: 6}, fixed: stormDelay,
			naks: newNakCapture(), gaveUp: newSeqSet(), opts: []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(httpConcurrency)}})
	}
	for _, v := range []struct {
		name  string
		start func(url string) starter
		to    *StormVariant
	}{{"jitter", jitter, &out.Jitter}, {"fixed", fixed, &out.Fixed}} {
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
	r, err := e.drain(ctx, durable, stormMaxAckPending, n, last, start(re.URL))
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
	v := StormVariant{Spread: spreadOf(seconds, spreadWindow, windowsIn(stormDelay, spreadWindow)), Drain: r.elapsed}
	lo, hi := bounds(firsts)
	v.FirstPass = hi.Sub(lo)
	return v, nil
}

func bounds(ts []time.Time) (lo, hi time.Time) {
	for i, t := range ts {
		if i == 0 || t.Before(lo) {
			lo = t
		}
		if i == 0 || t.After(hi) {
			hi = t
		}
	}
	return lo, hi
}

// failingOnce serves the storm and steady scenarios' engine: of unlimited
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
