package simengine

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Outcome is what became of one call.
type Outcome uint8

// Outcomes. A call is Pending until it ends in one of the others: Rejected
// at once as it arrives; Shed at once past the queue; Left from the queue;
// served and then Billed, Duplicate or Refused, or Abandoned while served.
// Their values are stable: Rejected, added last, comes last.
const (
	// Pending: the call waits in the queue, is being served, or is in its
	// Delay.
	Pending Outcome = iota
	// Billed: answered 2xx, the first 2xx for its key.
	Billed
	// Duplicate: answered 2xx for a key already billed; it is not billed
	// again.
	Duplicate
	// Refused: served, and answered a status other than 2xx by Answer.
	Refused
	// Shed: answered 503 or 429 at once, the servers busy and the queue
	// full.
	Shed
	// Left: the client gave up while the call waited in the queue; it was
	// never served.
	Left
	// Abandoned: the client gave up while the call was being served or in
	// its Delay; it is not billed, and its server is freed only when its
	// service time ends.
	Abandoned
	// Rejected: answered at once by Options.Refuse as it arrived, before
	// admission: never queued nor served, it held no server. Its status is
	// Refuse's; its wait and latency are 0.
	Rejected
)

var outcomeNames = [...]string{"pending", "billed", "duplicate", "refused", "shed", "left", "abandoned", "rejected"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Call is one call the engine took for a key.
type Call struct {
	N       int       // 1 for the key's first call
	At      time.Time // when it arrived
	Outcome Outcome
	// Status is the status answered; 0 while Pending, and for Left and
	// Abandoned (nobody was there to answer).
	Status int
	// Wait is the time it waited in the queue for a server.
	Wait time.Duration
	// Latency is from its arrival to its answer (wait, service and Delay)
	// for a served call (Billed, Duplicate, Refused); 0 otherwise (a Shed
	// or Rejected call is answered at once).
	Latency time.Duration
	// Header and Body are the request's headers and body, copies the caller
	// may keep, when Options.Record is set; nil otherwise.
	Header http.Header
	Body   []byte
}

// call is a Call as the engine keeps it: 32 bytes, times from the engine's
// start.
type call struct {
	at, wait, latency time.Duration
	status            int32
	outcome           Outcome
}

// keyCalls is what the engine keeps of one key.
type keyCalls struct {
	billed bool
	calls  []call
	// requests holds each call's request, by index, when Options.Record is
	// set: apart from calls, so that a call stays 32 bytes without it.
	requests []request
}

// request is what Options.Record keeps of a call's request.
type request struct {
	header http.Header
	body   []byte
}

// Stats are the engine's totals, and its state at one instant.
type Stats struct {
	// Calls is every call taken: each valid request (a POST with an
	// Idempotency-Key, that Check accepted), whatever became of it.
	Calls int64
	// BadRequests were answered 400 and are not calls.
	BadRequests int64

	// Served calls were answered after their service: Billed + Duplicates +
	// Refused, and 2xx for keys Keep does not keep.
	Served     int64
	Billed     int64
	Duplicates int64
	Refused    int64

	// Shed calls were answered at once: ShedUnavailable (503) + ShedTooMany
	// (429). ShedRetryAfter of them carried Retry-After.
	Shed            int64
	ShedUnavailable int64
	ShedTooMany     int64
	ShedRetryAfter  int64

	// Rejected calls were answered at once by Options.Refuse, before
	// admission: neither served nor shed, and not in Latencies. Every call
	// ends as one of Served, Shed, Rejected, Left or Abandoned.
	Rejected int64

	// Left calls were given up while queued, Abandoned ones while served.
	Left      int64
	Abandoned int64

	// Busy servers and Queued calls now; InSystem is their sum, and
	// MaxInSystem the most it has been.
	Busy        int
	Queued      int
	InSystem    int
	MaxInSystem int
}

// Latencies are the latencies of served calls, sorted.
type Latencies []time.Duration

// Quantile returns the q-quantile (q in [0, 1], e.g. 0.99) by the nearest
// rank: the smallest latency that at least q of them do not exceed. It
// returns 0 when there are none.
func (l Latencies) Quantile(q float64) time.Duration {
	if len(l) == 0 || math.IsNaN(q) {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(l))))
	return l[min(max(rank, 1), len(l))-1]
}

// Window is the width of the windows Arrivals counts in.
const Window = 100 * time.Millisecond

// bucket is the resolution arrivals are kept at: PeakArrivals slides a
// Window over them in steps of bucket.
const bucket = 10 * time.Millisecond

const bucketsPerWindow = int(Window / bucket)

// arrivals counts calls per bucket since the engine's start.
type arrivals []int32

func (a *arrivals) add(since time.Duration) {
	i := int(since / bucket)
	if i >= len(*a) {
		*a = slices.Grow(*a, i+1-len(*a))[:i+1]
	}
	(*a)[i]++
}

// windows sums the buckets per Window.
func (a arrivals) windows() []int {
	out := make([]int, (len(a)+bucketsPerWindow-1)/bucketsPerWindow)
	for i, n := range a {
		out[i/bucketsPerWindow] += int(n)
	}
	return out
}

// peak is the most calls in any Window, sliding in steps of bucket.
func (a arrivals) peak() int {
	best, sum := 0, 0
	for i, n := range a {
		sum += int(n)
		if i >= bucketsPerWindow {
			sum -= int(a[i-bucketsPerWindow])
		}
		best = max(best, sum)
	}
	return best
}
