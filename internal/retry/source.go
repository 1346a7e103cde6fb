package retry

import (
	"math/rand/v2"
	"sync"
)

// Source supplies the random numbers behind the jitter. Int64N returns a
// value in [0, n) and may panic if n <= 0. A *math/rand/v2.Rand satisfies it.
type Source interface {
	Int64N(n int64) int64
}

// Rand is a [Source] that is safe for concurrent use: a mutex guards a
// math/rand/v2 PCG generator. Create one with [NewRand]; the zero value is not
// usable.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns a Rand seeded with (seed, seed). The same seed always gives
// the same sequence, so a fixed seed makes a backoff schedule reproducible.
// Values are not suitable for security-sensitive work.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, seed))}
}

// Int64N returns a value in [0, n). It panics if n <= 0.
func (r *Rand) Int64N(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

// globalSource draws from the math/rand/v2 top-level generator, which is
// randomly seeded and safe for concurrent use.
type globalSource struct{}

func (globalSource) Int64N(n int64) int64 { return rand.Int64N(n) }
