package demo

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/meterline/meter-consumer/internal/enginetest"
)

// outcome is the answer drawn for a call not billed before.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeUnavailable
	outcomeRateLimited
	outcomeSlow
	outcomeUnprocessable
)

// RateEngineStats counts what a RateEngine answered.
type RateEngineStats struct {
	Billed        int64 // keys billed (200, including slow ones)
	Duplicates    int64 // 200 for a key already billed
	Unavailable   int64 // 503, drawn or shed
	RateLimited   int64 // 429, drawn or shed
	Slow          int64 // slow responses started
	Unprocessable int64 // 422
	BadRequests   int64 // 400
	Shed          int64 // answered at once past the capacity (503 or 429)
}

// RateEngine simulates the billing rate engine: an enginetest.Engine with a
// capacity, whose served calls draw their outcome. It is an http.Handler and
// is safe for concurrent requests.
type RateEngine struct {
	opts   RateEngineOptions
	engine *enginetest.Engine
	seed   uint64

	retryAfter    http.Header
	unavailable   atomic.Int64
	rateLimited   atomic.Int64
	slow          atomic.Int64
	unprocessable atomic.Int64
}

// NewRateEngine validates o, fills its defaults and returns the engine. A
// rejected o yields an error wrapping ErrConfig.
func NewRateEngine(o RateEngineOptions) (*RateEngine, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	re := &RateEngine{opts: o, seed: o.Rand.Uint64(), retryAfter: http.Header{"Retry-After": {o.RetryAfter}}}
	re.engine, err = enginetest.New(enginetest.Options{
		Servers:     o.Servers,
		ServiceTime: o.ServiceTime,
		Jitter:      serviceJitter,
		Queue:       o.Queue,
		Shedding:    o.Shedding,
		Rand:        o.Rand,
		Answer:      re.answer,
		Delay:       re.delay,
		Check:       enginetest.CheckJSON,
		Logger:      o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: rate engine: %w", ErrConfig, err)
	}
	return re, nil
}

// Engine returns the engine underneath: its capacity, its knobs (servers,
// queue, service time, shedding) and its records.
func (re *RateEngine) Engine() *enginetest.Engine {
	return re.engine
}

// Stats returns a snapshot of the counters.
func (re *RateEngine) Stats() RateEngineStats {
	st := re.engine.Stats()
	return RateEngineStats{
		Billed:        st.Billed,
		Duplicates:    st.Duplicates,
		Unavailable:   re.unavailable.Load() + st.ShedUnavailable,
		RateLimited:   re.rateLimited.Load() + st.ShedTooMany,
		Slow:          re.slow.Load(),
		Unprocessable: re.unprocessable.Load(),
		BadRequests:   st.BadRequests,
		Shed:          st.Shed,
	}
}

// ServeHTTP answers one posted read: 400 unless it is a POST of JSON with an
// Idempotency-Key; shed at once past the capacity; otherwise, once served,
// 200 for a key already billed, or the outcome drawn.
func (re *RateEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	re.engine.ServeHTTP(w, r)
}

// delay makes a call drawn slow wait SlowDelay once served; it holds no
// server meanwhile.
func (re *RateEngine) delay(key string, n int) time.Duration {
	if re.engine.Billed(key) || re.draw(key, n) != outcomeSlow {
		return 0
	}
	re.slow.Add(1)
	return re.opts.SlowDelay
}

// answer is a served call's answer: 200 for a key already billed, else the
// outcome drawn.
func (re *RateEngine) answer(key string, n int) (int, http.Header) {
	if re.engine.Billed(key) {
		return http.StatusOK, nil // a duplicate
	}
	switch re.draw(key, n) {
	case outcomeUnavailable:
		re.unavailable.Add(1)
		return http.StatusServiceUnavailable, nil
	case outcomeRateLimited:
		re.rateLimited.Add(1)
		return http.StatusTooManyRequests, re.retryAfter
	case outcomeUnprocessable:
		re.unprocessable.Add(1)
		return http.StatusUnprocessableEntity, nil
	}
	return http.StatusOK, nil
}

// draw picks the outcome of the n-th call of key. It is a function of the
// engine's seed, the key and n, so that delay and answer draw the same, and
// a given seed gives the same outcomes whatever the order of the calls.
func (re *RateEngine) draw(key string, n int) outcome {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	p := rand.New(rand.NewPCG(re.seed, h.Sum64()+uint64(n))).IntN(100)
	for _, c := range []struct {
		percent int
		out     outcome
	}{
		{re.opts.OKPercent, outcomeOK},
		{re.opts.UnavailablePercent, outcomeUnavailable},
		{re.opts.RateLimitedPercent, outcomeRateLimited},
		{re.opts.SlowPercent, outcomeSlow},
	} {
		if p < c.percent {
			return c.out
		}
		p -= c.percent
	}
	return outcomeUnprocessable
}
