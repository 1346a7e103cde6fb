package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// Defaults of RateEngineOptions.
const (
	DefaultOKPercent            = 82
	DefaultUnavailablePercent   = 7
	DefaultRateLimitedPercent   = 4
	DefaultSlowPercent          = 4
	DefaultUnprocessablePercent = 3
	DefaultSlowDelay            = 1500 * time.Millisecond
	DefaultRetryAfter           = "1"

	// The capacity: 8 servers of 40ms serve 200 reads a second, about ten
	// times what the head-end publishes; 16 more wait in the queue.
	DefaultServers     = 8
	DefaultServiceTime = 40 * time.Millisecond
	DefaultQueue       = 16
)

// DefaultOverload is the capacity of the overload phase: 1 server of 100ms
// serves 10 reads a second, half what the head-end publishes, and 4 more
// wait; the rest are shed.
var DefaultOverload = Capacity{Servers: 1, ServiceTime: 100 * time.Millisecond, Queue: 4}

// Capacity is an engine's servers, each serving a call for about
// ServiceTime, and its queue.
type Capacity struct {
	Servers     int
	ServiceTime time.Duration
	Queue       int
}

// perSecond is the calls served a second when busy.
func (c Capacity) perSecond() float64 { return float64(c.Servers) / c.ServiceTime.Seconds() }

// DefaultShedding answers a call past the queue 503, or 429 for a quarter of
// them, a fifth of them with Retry-After: 1.
var DefaultShedding = simengine.Shedding{TooManyShare: 0.25, RetryAfterShare: 0.2, RetryAfter: time.Second}

// serviceJitter spreads each service time over ±25% of ServiceTime.
const serviceJitter = 0.25

// RateEngineOptions configures a RateEngine. When all five percentages are
// zero the defaults 82/7/4/4/3 apply; otherwise each must be in [0, 100] and
// they must add up to 100. They are the outcomes of the calls the engine
// serves; past its capacity, it sheds calls before they are drawn.
type RateEngineOptions struct {
	// Rand seeds every draw: the outcomes, the shedding and the service
	// times. NewRateEngine takes its draws from it and keeps it no longer.
	Rand *rand.Rand

	OKPercent            int // 200, the read is billed
	UnavailablePercent   int // 503
	RateLimitedPercent   int // 429 with Retry-After
	SlowPercent          int // SlowDelay, then 200 and billed
	UnprocessablePercent int // 422 with a JSON error body

	// SlowDelay is how long a slow response takes (default 1500ms).
	SlowDelay time.Duration
	// RetryAfter is the Retry-After value sent with 429 (default "1").
	RetryAfter string

	// Servers serve calls in parallel, each for about ServiceTime (±25%);
	// Queue more wait for a server, and the rest are shed as Shedding says.
	// The capacity is Servers/ServiceTime reads a second. Zero values take
	// DefaultServers, DefaultServiceTime, DefaultQueue and DefaultShedding.
	Servers     int
	ServiceTime time.Duration
	Queue       int
	Shedding    simengine.Shedding
	// Overload is the capacity of PhaseOverload; a zero field takes
	// DefaultOverload's.
	Overload Capacity

	// Metrics, when set, exports the engine's phase.
	Metrics *Metrics
	// Logger receives one debug record per request, and the phases
	// Incidents puts the engine through (default: discarded).
	Logger *slog.Logger
}

// withDefaults fills the zero fields and validates the result.
func (o RateEngineOptions) withDefaults() (RateEngineOptions, error) {
	if o.OKPercent == 0 && o.UnavailablePercent == 0 && o.RateLimitedPercent == 0 &&
		o.SlowPercent == 0 && o.UnprocessablePercent == 0 {
		o.OKPercent = DefaultOKPercent
		o.UnavailablePercent = DefaultUnavailablePercent
		o.RateLimitedPercent = DefaultRateLimitedPercent
		o.SlowPercent = DefaultSlowPercent
		o.UnprocessablePercent = DefaultUnprocessablePercent
	}
	if o.SlowDelay == 0 {
		o.SlowDelay = DefaultSlowDelay
	}
	if o.RetryAfter == "" {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Servers == 0 {
		o.Servers = DefaultServers
	}
	if o.ServiceTime == 0 {
		o.ServiceTime = DefaultServiceTime
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	if o.Shedding == (simengine.Shedding{}) {
		o.Shedding = DefaultShedding
	}
	if o.Overload.Servers == 0 {
		o.Overload.Servers = DefaultOverload.Servers
	}
	if o.Overload.ServiceTime == 0 {
		o.Overload.ServiceTime = DefaultOverload.ServiceTime
	}
	if o.Overload.Queue == 0 {
		o.Overload.Queue = DefaultOverload.Queue
	}

	var errs []error
	if o.Rand == nil {
		errs = append(errs, errors.New("Rand is nil"))
	}
	sum := 0
	for _, p := range []struct {
		name  string
		value int
	}{
		{"OKPercent", o.OKPercent},
		{"UnavailablePercent", o.UnavailablePercent},
		{"RateLimitedPercent", o.RateLimitedPercent},
		{"SlowPercent", o.SlowPercent},
		{"UnprocessablePercent", o.UnprocessablePercent},
	} {
		if p.value < 0 || p.value > 100 {
			errs = append(errs, fmt.Errorf("%s %d is not in [0, 100]", p.name, p.value))
		}
		sum += p.value
	}
	if sum != 100 {
		errs = append(errs, fmt.Errorf("percentages add up to %d, want 100", sum))
	}
	if o.Overload.Servers < 0 {
		errs = append(errs, fmt.Errorf("Overload.Servers %d is negative", o.Overload.Servers))
	}
	if o.Overload.ServiceTime < 0 {
		errs = append(errs, fmt.Errorf("Overload.ServiceTime %v is negative", o.Overload.ServiceTime))
	}
	if o.Overload.Queue < 0 {
		errs = append(errs, fmt.Errorf("Overload.Queue %d is negative", o.Overload.Queue))
	}
	if o.SlowDelay < 0 {
		errs = append(errs, fmt.Errorf("SlowDelay %v is negative", o.SlowDelay))
	}
	if strings.TrimSpace(o.RetryAfter) != o.RetryAfter || strings.ContainsAny(o.RetryAfter, "\r\n") {
		errs = append(errs, fmt.Errorf("RetryAfter %q is not a valid header value", o.RetryAfter))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("%w: rate engine: %w", ErrConfig, errors.Join(errs...))
	}
	return o, nil
}
