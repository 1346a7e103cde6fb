package demo

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
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
	Unavailable   int64 // 503: drawn, shed or down
	RateLimited   int64 // 429, drawn or shed
	Slow          int64 // slow responses started
	Unprocessable int64 // 422
	BadRequests   int64 // 400
	Shed          int64 // answered at once past the capacity (503 or 429)
	Down          int64 // answered 503 at once in the outage phase, outside the engine
}

// RateEngine simulates the billing rate engine: an simengine.Engine with a
// capacity, whose calls draw their outcome. It is an http.Handler and is safe
// for concurrent requests.
//
// The outcome of a call is a fact about its read: a function of the seed, the
// read's key and the call's number n, never of the load. A read's own
// failures (503, 429 with Retry-After, 422) are answered at once as the call
// arrives (simengine's Refuse), before any rating work and without taking a
// server or a queue place, as a real engine answers a tariff whose service is
// down or an account over its quota; a call drawn 200 or slow is served. The
// load shows only through the capacity, as a real engine's does: calls wait
// in the queue, and past it they are shed.
type RateEngine struct {
	opts   RateEngineOptions
	engine *simengine.Engine
	seed   uint64

	retryAfter    http.Header
	unavailable   atomic.Int64
	rateLimited   atomic.Int64
	slow          atomic.Int64
	unprocessable atomic.Int64

	phaseMu sync.Mutex   // held while a phase is set, so that two do not interleave
	phase   atomic.Value // Phase
	down    atomic.Bool  // the outage phase: answer 503 before the engine
	downs   atomic.Int64
}

// NewRateEngine validates o, fills its defaults and returns the engine. A
// rejected o yields an error wrapping ErrConfig.
func NewRateEngine(o RateEngineOptions) (*RateEngine, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	re := &RateEngine{opts: o, seed: o.Rand.Uint64(), retryAfter: http.Header{"Retry-After": {o.RetryAfter}}}
	re.engine, err = simengine.New(simengine.Options{
		Servers:     o.Servers,
		ServiceTime: o.ServiceTime,
		Jitter:      serviceJitter,
		Queue:       o.Queue,
		Shedding:    o.Shedding,
		Rand:        o.Rand,
		Refuse:      re.refuse,
		Delay:       re.delay,
		Check:       simengine.CheckJSON,
		Logger:      o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: rate engine: %w", ErrConfig, err)
	}
	re.phase.Store(PhaseNormal)
	o.Metrics.set(PhaseNormal)
	return re, nil
}

// Phase returns the phase the engine is in: PhaseNormal until SetPhase or
// Incidents change it.
func (re *RateEngine) Phase() Phase {
	return re.phase.Load().(Phase)
}

// SetPhase puts the engine in phase p at once: PhaseNormal and PhaseOutage
// give it its own capacity (Servers, ServiceTime, Queue), PhaseOverload
// that of Options.Overload; PhaseOutage answers every call arriving from
// now on 503 at once. An unknown p yields an error wrapping ErrConfig.
func (re *RateEngine) SetPhase(p Phase) error {
	if !p.valid() {
		return fmt.Errorf("%w: rate engine: phase %q is not normal, overload or outage", ErrConfig, p)
	}
	re.setPhase(p)
	return nil
}

// setPhase sets p, a valid phase.
func (re *RateEngine) setPhase(p Phase) {
	re.phaseMu.Lock()
	defer re.phaseMu.Unlock()
	c := re.capacity(p)
	// Valid at NewRateEngine, so valid now: the errors cannot happen.
	_ = re.engine.SetServiceTime(c.ServiceTime, serviceJitter)
	_ = re.engine.SetQueue(c.Queue)
	_ = re.engine.SetServers(c.Servers)
	re.down.Store(p == PhaseOutage)
	re.phase.Store(p)
	re.opts.Metrics.set(p)
}

// capacity is the capacity of phase p.
func (re *RateEngine) capacity(p Phase) Capacity {
	if p == PhaseOverload {
		return re.opts.Overload
	}
	return Capacity{Servers: re.opts.Servers, ServiceTime: re.opts.ServiceTime, Queue: re.opts.Queue}
}

// Engine returns the engine underneath: its capacity, its knobs (servers,
// queue, service time, shedding) and its records.
func (re *RateEngine) Engine() *simengine.Engine {
	return re.engine
}

// Stats returns a snapshot of the counters.
func (re *RateEngine) Stats() RateEngineStats {
	st := re.engine.Stats()
	return RateEngineStats{
		Billed:        st.Billed,
		Duplicates:    st.Duplicates,
		Unavailable:   re.unavailable.Load() + st.ShedUnavailable + re.downs.Load(),
		RateLimited:   re.rateLimited.Load() + st.ShedTooMany,
		Slow:          re.slow.Load(),
		Unprocessable: re.unprocessable.Load(),
		BadRequests:   st.BadRequests,
		Shed:          st.Shed,
		Down:          re.downs.Load(),
	}
}

// ServeHTTP answers one posted read: 503 at once in the outage phase,
// whatever the request; otherwise 400 unless it is a POST of JSON with an
// Idempotency-Key; a failure drawn for a key not yet billed (503, 429, 422)
// at once; shed at once past the capacity; otherwise, once served, 200
// (slowly for a call drawn slow; a duplicate for a key already billed).
func (re *RateEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if re.down.Load() {
		re.downs.Add(1)
		if log := re.opts.Logger; log.Enabled(r.Context(), slog.LevelDebug) {
			log.LogAttrs(r.Context(), slog.LevelDebug, "rate engine answered",
				slog.String("idempotency_key", r.Header.Get(simengine.KeyHeader)),
				slog.Int("status", http.StatusServiceUnavailable), slog.String("outcome", "down"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(bodyDown)
		return
	}
	re.engine.ServeHTTP(w, r)
}

// bodyDown is the answer of every call in the outage phase.
var bodyDown = []byte(`{"error":"rate engine unavailable"}` + "\n")

// delay makes a call drawn slow wait SlowDelay once served; it holds no
// server meanwhile.
func (re *RateEngine) delay(key string, n int) time.Duration {
	if re.engine.Billed(key) || re.draw(key, n) != outcomeSlow {
		return 0
	}
	re.slow.Add(1)
	return re.opts.SlowDelay
}

// refuse is the engine's Refuse: a failure drawn for the n-th call of a key
// not yet billed, answered at once; 0 (served as usual) for a key already
// billed, whose call is a duplicate, and for an outcome of 200 or slow.
func (re *RateEngine) refuse(key string, n int) (int, http.Header) {
	if re.engine.Billed(key) {
		return 0, nil // a duplicate: served, answered 200
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
	return 0, nil
}

// draw picks the outcome of the n-th call of key. It is a function of the
// engine's seed, the key and n, so that refuse and delay draw the same, and
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
