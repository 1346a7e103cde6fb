package bench

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// readKind is what the engine matrix's engine does with one read.
type readKind uint8

const (
	healthy   readKind = iota // 200 to every call
	failOnce                  // 503 to its first call, 200 after
	tooMany                   // 429 with Retry-After: 1 to its first call, 200 after
	alwaysBad                 // 503 to every call
	throttled                 // its account's: 429 with Retry-After: 60 to its first call, 200 after
)

// readMix is the share of the reads of each kind; the rest are healthy.
type readMix map[readKind]float64

// The engine matrix's read mixes; accountMix is one account over its
// quota: a twentieth of the reads.
var (
	healthyMix = readMix{}
	partialMix = readMix{failOnce: 0.15, tooMany: 0.03, alwaysBad: 0.05}
	accountMix = readMix{throttled: 0.05}
)

// retryAfterAsked is the Retry-After the 429 reads are answered with;
// quotaAsked the one the throttled account's reads are.
const (
	retryAfterAsked = time.Second
	quotaAsked      = time.Minute
)

// kinds gives each of reads 0..n-1 its kind: exactly round(share x n) of
// each, chosen by a permutation drawn from seed, so the mix is exact and the
// same for every variant of a run.
func (m readMix) kinds(n int, seed uint64) []readKind {
	out := make([]readKind, n)
	perm := rand.New(rand.NewPCG(seed, 0x9a7)).Perm(n)
	at := 0
	for _, k := range []readKind{failOnce, tooMany, alwaysBad, throttled} {
		for range int(math.Round(m[k] * float64(n))) {
			out[perm[at]] = k
			at++
		}
	}
	return out
}

// answer is the engine's Answer for reads of the given kinds, answered
// once served: refusal's failures, 200 otherwise.
func answer(kinds []readKind) func(key string, n int) (int, http.Header) {
	refuse := refusal(kinds)
	return func(key string, n int) (int, http.Header) {
		if status, h := refuse(key, n); status != 0 {
			return status, h
		}
		return http.StatusOK, nil
	}
}

// refusal is the engine's Refuse for reads of the given kinds, their
// failures answered at once: the read is found from its idempotency key
// (Index), n is the call number of that key; 0 lets the call be served.
func refusal(kinds []readKind) func(key string, n int) (int, http.Header) {
	retryAfter := http.Header{"Retry-After": {"1"}}
	quota := http.Header{"Retry-After": {"60"}}
	return func(key string, n int) (int, http.Header) {
		i, ok := Index(key)
		if !ok || i >= len(kinds) {
			return 0, nil
		}
		switch kinds[i] {
		case failOnce:
			if n == 1 {
				return http.StatusServiceUnavailable, nil
			}
		case tooMany:
			if n == 1 {
				return http.StatusTooManyRequests, retryAfter
			}
		case throttled:
			if n == 1 {
				return http.StatusTooManyRequests, quota
			}
		case alwaysBad:
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}
}

// LatencyShape is how long the engine matrix's engine takes to answer,
// whatever the load: it has no limit on its servers, so nothing queues.
type LatencyShape struct {
	Name string
	// ServiceTime spread by Jitter (simengine's options): uniform in
	// ServiceTime x [1-Jitter, 1+Jitter].
	ServiceTime time.Duration
	Jitter      float64
	// TailShare of the calls, drawn per call from the key, the call number
	// and the seed (simengine's Delay), take Tail in all instead of
	// ServiceTime, when set.
	TailShare float64
	Tail      time.Duration
}

// The engine matrix's latency shapes.
var (
	uniformShape = LatencyShape{Name: "uniform 5-25ms", ServiceTime: 15 * time.Millisecond, Jitter: 2.0 / 3}
	// tailShape is the long tail: 5ms, one call in ten 80ms.
	tailShape = LatencyShape{Name: "long tail 5ms, 1 in 10 at 80ms", ServiceTime: 5 * time.Millisecond, TailShare: 0.1, Tail: 80 * time.Millisecond}
)

// options are the engine's options for the shape, seeded from seed.
func (s LatencyShape) options(seed uint64) simengine.Options {
	return simengine.Options{ServiceTime: s.ServiceTime, Jitter: s.Jitter, Rand: seeded(seed, 0x5a9e), Delay: s.delayFunc(seed)}
}

// delayFunc is the shape's Delay, seeded from seed, or nil without a tail:
// it adds Tail - ServiceTime to TailShare of the calls, drawn from a hash
// of the seed, the key and the call number.
func (s LatencyShape) delayFunc(seed uint64) func(key string, n int) time.Duration {
	if s.TailShare <= 0 {
		return nil
	}
	extra := max(0, s.Tail-s.ServiceTime)
	return func(key string, n int) time.Duration {
		if unitDraw(seed^0x7a11, key, n) < s.TailShare {
			return extra
		}
		return 0
	}
}

// unitDraw is a number uniform in [0, 1) drawn from a hash of the seed, the
// key and the call number: the same call draws the same in every run and
// every variant.
func unitDraw(seed uint64, key string, n int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return rand.New(rand.NewPCG(seed^h.Sum64(), uint64(n))).Float64()
}
