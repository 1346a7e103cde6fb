package simengine

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// ErrInvalid wraps every rejected option or knob value.
var ErrInvalid = errors.New("invalid rate engine option")

// Options configures an Engine. The zero value is an engine of unlimited
// capacity that answers 200 at once to every valid call, which is what the
// loopback engines of the tests and the bench were.
type Options struct {
	// Servers is how many calls are served in parallel, e.g. 8; 0 means
	// unlimited (no call ever waits or is shed).
	Servers int
	// ServiceTime is how long a call holds its server, e.g. 6ms (its mean
	// when Jitter is set); 0 answers at once.
	ServiceTime time.Duration
	// Jitter spreads each call's service time uniformly over
	// ServiceTime × [1-Jitter, 1+Jitter]; in [0, 1]. The mean, and so the
	// capacity, does not change.
	Jitter float64
	// Queue is how many calls may wait for a server, first in first out,
	// e.g. 16. A call that finds every server busy and the queue full is
	// shed: answered at once, as Shedding says.
	Queue int
	// Shedding is how shed calls are answered.
	Shedding Shedding

	// Rand seeds the engine's own sources (one for shedding, one for the
	// jitter), so a given seed gives the same draws in the same order; New
	// takes four draws from it and keeps it no longer. nil uses a fixed seed.
	Rand *rand.Rand

	// Answer, when set, gives the answer of a served call: it is consulted
	// when the call is about to be answered, after its service and Delay,
	// and before the engine bills it. n is 1 for the first call that
	// carried key, 2 for the second, and so on, every call counted (shed ones
	// and those whose client gave up included); it is 0 for a key that Keep
	// does not keep. A status of 0 means 200; a status outside [200, 599] is
	// answered 500. nil answers 200 to every call. It is called from many
	// goroutines at once.
	Answer func(key string, n int) (status int, header http.Header)
	// Refuse, when set, is consulted for every call as it arrives, after the
	// ledger has counted it (n is numbered as for Answer, this call
	// included) and before it is admitted to the servers or the queue: the
	// failures a real engine answers at once, before any rating work (a 503
	// for one tariff whose service is down, a 429 for one account over its
	// quota). A status of 0 lets the call go on as usual; any other status
	// is answered at once with header, the call never queued nor served and
	// holding no server: it is [Rejected]. Refuse may only refuse: a status
	// outside [400, 599] (a 2xx included) is answered 500, so that a
	// mistaken Refuse never bills. It is called from many goroutines at
	// once, without the engine's lock.
	Refuse func(key string, n int) (status int, header http.Header)
	// Delay, when set, adds a latency to a served call, after its service:
	// the call holds no server meanwhile (a slow answer on its way back, not
	// a busier engine; change the service time for that). It is called from
	// many goroutines at once.
	Delay func(key string, n int) time.Duration
	// Check, when set, is consulted for every request that is a POST with an
	// Idempotency-Key, with its body (read up to 1 MiB), before the call
	// enters the engine; a non-nil error is answered 400 with its text, and
	// the request is counted as a bad request, not as a call. It may record
	// what it sees. nil leaves the body unread (it is drained).
	Check func(r *http.Request, body []byte) error
	// Keep, when set, says which keys the engine keeps the calls of (its
	// ledger); nil keeps every key. A key not kept still counts in every
	// total but has no Calls, and a 2xx for it counts in Stats.Served but
	// neither as billed nor as a duplicate: it keeps a bench's memory flat.
	Keep func(key string) bool
	// Record, when set, keeps each call's request headers and body (read up
	// to 1 MiB) with the call, for a test that checks what reached the
	// engine: [Engine.Calls] and [Engine.Ledger] return them in Call.Header
	// and Call.Body. Only calls of keys kept are recorded, and never a bad
	// request. It costs a copy of both per call: leave it off in a bench.
	Record bool

	// Logger receives one debug record per answered call (default:
	// discarded).
	Logger *slog.Logger
}

// Shedding says how calls past the queue are answered: 503, or 429 for a
// share of them, each with a Retry-After for a share of them. Both shares are
// drawn, call by call, from the engine's seeded source.
type Shedding struct {
	// TooManyShare is the share of shed calls answered 429 instead of 503,
	// in [0, 1].
	TooManyShare float64
	// RetryAfterShare is the share of shed calls that carry a Retry-After
	// header, in [0, 1].
	RetryAfterShare float64
	// RetryAfter is that header's value, sent as delta-seconds rounded up
	// to a whole second (default 1s).
	RetryAfter time.Duration
}

// retryAfterSeconds is the Retry-After value s sends.
func (s Shedding) retryAfterSeconds() string {
	d := s.RetryAfter
	if d <= 0 {
		d = time.Second
	}
	return fmt.Sprint(int64((d + time.Second - 1) / time.Second))
}

func (s Shedding) validate() []error {
	var errs []error
	if !share(s.TooManyShare) {
		errs = append(errs, fmt.Errorf("Shedding.TooManyShare %v is not in [0, 1]", s.TooManyShare))
	}
	if !share(s.RetryAfterShare) {
		errs = append(errs, fmt.Errorf("Shedding.RetryAfterShare %v is not in [0, 1]", s.RetryAfterShare))
	}
	if s.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("Shedding.RetryAfter %v is negative", s.RetryAfter))
	}
	return errs
}

func (o Options) validate() error {
	var errs []error
	errs = append(errs, validServers(o.Servers)...)
	errs = append(errs, validQueue(o.Queue)...)
	errs = append(errs, validService(o.ServiceTime, o.Jitter)...)
	errs = append(errs, o.Shedding.validate()...)
	return joined(errs)
}

func validServers(n int) []error {
	if n < 0 {
		return []error{fmt.Errorf("Servers %d is negative", n)}
	}
	return nil
}

func validQueue(n int) []error {
	if n < 0 {
		return []error{fmt.Errorf("Queue %d is negative", n)}
	}
	return nil
}

func validService(d time.Duration, jitter float64) []error {
	var errs []error
	if d < 0 {
		errs = append(errs, fmt.Errorf("ServiceTime %v is negative", d))
	}
	if !share(jitter) {
		errs = append(errs, fmt.Errorf("Jitter %v is not in [0, 1]", jitter))
	}
	return errs
}

func share(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= 1 }

func joined(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}
