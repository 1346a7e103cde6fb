package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/meterline/meter-consumer/internal/dlq"
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

// PartialRun is how the product or the bare client drained a cell of the
// engine matrix, read from the engine's ledger (partialOutcome).
type PartialRun struct {
	// Healthy reads (200 to every call); HealthyBilled of them billed, the
	// last of them at HealthyElapsed from the start (HealthyDone), or the
	// deadline when some were not; Goodput is HealthyBilled /
	// HealthyElapsed.
	Healthy, HealthyBilled int
	HealthyDone            bool
	HealthyElapsed         time.Duration
	Goodput                float64
	// Lateness of each retry: from the answer of the failed call to the
	// read's next call, less the delay the variant asked for it.
	Lateness Lateness
	// The reads that always fail: the fewest and most calls of one.
	AlwaysBad, AlwaysCallsMin, AlwaysCallsMax int
	// BillableDeadLettered reads were dead-lettered though the engine
	// would have billed them.
	BillableDeadLettered int
}

// mixEngine serves an engine of shape, answering the reads as their kinds
// say, seeded from seed: their failures at once (Refuse) when atOnce, or
// once served (Answer), after the shape's service time.
func mixEngine(ctx context.Context, shape LatencyShape, kinds []readKind, seed uint64, atOnce bool) (*simengine.Server, error) {
	o := shape.options(seed)
	if atOnce {
		o.Refuse = refusal(kinds)
	} else {
		o.Answer = answer(kinds)
	}
	return serveEngine(ctx, o)
}

// Lateness is how late a variant's retries were: Count measured, Missing
// that could not be (no delay asked is known for the failed call, or the
// read was not called again before the variant stopped).
type Lateness struct {
	Count   int `json:"count"`
	Missing int `json:"missing"`
	Percentiles
}

// partialOutcome reads what the engine's ledger says of one variant: read i
// had kind kinds[i] and stream sequence i+1; the variant started at start
// and ran for elapsed; naks holds the delays it asked, deadLettered the
// reads it dead-lettered (by index).
type partialOutcome struct {
	ledger       map[string][]simengine.Call
	kinds        []readKind
	start        time.Time
	elapsed      time.Duration
	naks         *nakCapture
	deadLettered func(i int) bool
}

// measure reads the variant's figures from the ledger.
func (o partialOutcome) measure() (run PartialRun) {
	var late []time.Duration
	var lastHealthy time.Time
	run.AlwaysCallsMin = math.MaxInt
	for i, kind := range o.kinds {
		calls := o.ledger[Key(i)]
		switch kind {
		case healthy:
			run.Healthy++
			for _, c := range calls {
				if c.Outcome == simengine.Billed {
					run.HealthyBilled++
					if at := answered(c); at.After(lastHealthy) {
						lastHealthy = at
					}
				}
			}
		case alwaysBad:
			run.AlwaysBad++
			run.AlwaysCallsMin, run.AlwaysCallsMax = min(run.AlwaysCallsMin, len(calls)), max(run.AlwaysCallsMax, len(calls))
		}
		if kind != alwaysBad && o.deadLettered(i) {
			run.BillableDeadLettered++
		}
		late, run.Lateness.Missing = o.lateness(late, run.Lateness.Missing, calls, uint64(i+1))
	}
	if run.AlwaysBad == 0 {
		run.AlwaysCallsMin = 0
	}
	run.Lateness.Count = len(late)
	run.Lateness.Percentiles = percentilesOf(late)
	run.HealthyElapsed = o.elapsed
	if run.HealthyBilled == run.Healthy && run.Healthy > 0 {
		run.HealthyDone = true
		run.HealthyElapsed = lastHealthy.Sub(o.start)
	}
	if run.HealthyElapsed > 0 {
		run.Goodput = float64(run.HealthyBilled) / run.HealthyElapsed.Seconds()
	}
	return run
}

// lateness appends, for each delay asked for the read at seq, the time from
// the answer of the failed call it followed to the next call, less the
// delay.
func (o partialOutcome) lateness(late []time.Duration, missing int, calls []simengine.Call, seq uint64) ([]time.Duration, int) {
	for _, a := range o.naks.all(seq) {
		failed := -1
		for j, c := range calls {
			if !billedOrDuplicate(c) && !answered(c).After(a.at) {
				failed = j
			}
		}
		if failed < 0 || failed+1 >= len(calls) {
			missing++
			continue
		}
		late = append(late, calls[failed+1].At.Sub(answered(calls[failed]))-a.delay)
	}
	return late, missing
}

// answered is when the engine answered c: its latency counts from its
// arrival; a call its client left before it was served has only a wait.
func answered(c simengine.Call) time.Time { return c.At.Add(max(c.Wait, c.Latency)) }

func billedOrDuplicate(c simengine.Call) bool {
	return c.Outcome == simengine.Billed || c.Outcome == simengine.Duplicate
}

// deadLetteredReads returns the reads (by index) whose copies are in the
// dead-letter stream, with the reason of each.
func deadLetteredReads(ctx context.Context, e *env) (map[int]string, error) {
	st, err := e.js.Stream(ctx, e.topo.DLQStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	out := map[int]string{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("dead-letter copy %d: %w", seq, err)
		}
		orig, err := strconv.ParseUint(m.Header.Get(dlq.HeaderSequence), 10, 64)
		if err != nil || orig == 0 {
			return nil, fmt.Errorf("dead-letter copy %d: no %s header", seq, dlq.HeaderSequence)
		}
		out[int(orig-1)] = m.Header.Get(dlq.HeaderReason)
	}
	return out, nil
}
