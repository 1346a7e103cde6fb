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

	"github.com/nats-io/nats.go/jetstream"

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

// The matrix's read mixes; accountMix is one account over its quota.
var (
	healthyMix = readMix{}
	partialMix = readMix{failOnce: 0.15, tooMany: 0.03, alwaysBad: 0.05}
	accountMix = readMix{throttled: 0.05}
)

const quotaAsked = time.Minute // the throttled account's Retry-After

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

// count is how many of kinds are k.
func count(kinds []readKind, k readKind) (n int) {
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

// failures are how the engine fails a read of each kind: with status and
// header, to its first call or to every call.
var failures = [...]struct {
	status int
	header http.Header
	every  bool
}{
	failOnce:  {status: http.StatusServiceUnavailable},
	tooMany:   {status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}}},
	alwaysBad: {status: http.StatusServiceUnavailable, every: true},
	throttled: {status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"60"}}},
}

// refusal is the engine's Refuse for reads of the given kinds (read i is
// Key(i)), their failures answered at once; 0 lets the call be served.
func refusal(kinds []readKind) func(key string, n int) (int, http.Header) {
	return func(key string, n int) (int, http.Header) {
		if i, ok := Index(key); ok && i < len(kinds) {
			if f := failures[kinds[i]]; n == 1 || f.every {
				return f.status, f.header
			}
		}
		return 0, nil
	}
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

// LatencyShape is how long the matrix's engine takes to answer, whatever
// the load (it has no limit on its servers, so nothing queues): its
// ServiceTime spread by Jitter as simengine does, and when set, TailShare
// of its calls taking Tail in all.
type LatencyShape struct {
	Name        string
	ServiceTime time.Duration
	Jitter      float64
	TailShare   float64
	Tail        time.Duration
}

// The matrix's latency shapes: uniform, and the long tail.
var (
	uniformShape = LatencyShape{Name: "uniform 5-25ms", ServiceTime: 15 * time.Millisecond, Jitter: 2.0 / 3}
	tailShape    = LatencyShape{Name: "long tail 5ms, 1 in 10 at 80ms", ServiceTime: 5 * time.Millisecond, TailShare: 0.1, Tail: 80 * time.Millisecond}
)

// options are the engine's options for the shape, seeded from seed.
func (s LatencyShape) options(seed uint64) simengine.Options {
	return simengine.Options{ServiceTime: s.ServiceTime, Jitter: s.Jitter, Rand: seeded(seed, 0x5a9e), Delay: s.delayFunc(seed)}
}

// delayFunc is the shape's Delay, seeded from seed, or nil without a tail:
// it adds Tail - ServiceTime to TailShare of the calls (unitDraw).
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

// mixEngine serves an engine of shape seeded from seed, failing the reads
// as their kinds say: at once (Refuse) when atOnce, else once served.
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
// not (no delay asked is known for the failed call, or the read was not
// called again before the variant stopped).
type Lateness struct {
	Count   int `json:"count"`
	Missing int `json:"missing"`
	Percentiles
}

// partialOutcome reads what the engine's ledger says of one variant: read i
// had kind kinds[i] and stream sequence i+1; the variant started at start
// and ran for elapsed; naks holds the delays it asked, deadLettered the
// reads it dead-lettered (by index, with the reason when known).
type partialOutcome struct {
	ledger       map[string][]simengine.Call
	kinds        []readKind
	start        time.Time
	elapsed      time.Duration
	naks         *nakCapture
	deadLettered func(i int) (reason string, ok bool)
}

// measure reads the variant's figures from the ledger into cell: the
// healthy reads' Goodput (to the last of them billed, or the deadline when
// some were not) and GoodputDone, the always-503 reads' calls and
// exhaustions, the retries' Lateness, and BillableDeadLettered.
func (o partialOutcome) measure(cell *EngineCell) {
	var late []time.Duration
	var lastHealthy time.Time
	healthyReads, billed := 0, 0
	cell.AlwaysCallsMin = math.MaxInt
	for i, kind := range o.kinds {
		calls := o.ledger[Key(i)]
		reason, dead := o.deadLettered(i)
		switch kind {
		case healthy:
			healthyReads++
			for _, c := range calls {
				if at := answered(c); c.Outcome == simengine.Billed {
					billed++
					if at.After(lastHealthy) {
						lastHealthy = at
					}
				}
			}
		case alwaysBad:
			cell.AlwaysBad++
			cell.AlwaysCallsMin, cell.AlwaysCallsMax = min(cell.AlwaysCallsMin, len(calls)), max(cell.AlwaysCallsMax, len(calls))
			if reason == "exhausted" {
				cell.AlwaysExhausted++
			}
		}
		if kind != alwaysBad && dead {
			cell.BillableDeadLettered++
		}
		// A retry is late by the time from the answer of the failed call
		// its delay followed to the read's next call, less the delay.
		for _, a := range o.naks.all(uint64(i + 1)) {
			failed := -1
			for j, c := range calls {
				if c.Outcome != simengine.Billed && c.Outcome != simengine.Duplicate && !answered(c).After(a.at) {
					failed = j
				}
			}
			if failed < 0 || failed+1 >= len(calls) {
				cell.Lateness.Missing++
				continue
			}
			late = append(late, calls[failed+1].At.Sub(answered(calls[failed]))-a.delay)
		}
	}
	if cell.AlwaysBad == 0 {
		cell.AlwaysCallsMin = 0
	}
	cell.Lateness.Count, cell.Lateness.Percentiles = len(late), percentilesOf(late)
	elapsed := o.elapsed
	if cell.GoodputDone = billed == healthyReads && healthyReads > 0; cell.GoodputDone {
		elapsed = lastHealthy.Sub(o.start)
	}
	if elapsed > 0 {
		cell.Goodput = float64(billed) / elapsed.Seconds()
	}
}

// answered is when the engine answered c: its latency counts from its
// arrival; a call its client left before it was served has only a wait.
func answered(c simengine.Call) time.Time { return c.At.Add(max(c.Wait, c.Latency)) }

// deadLetteredReads returns the reads (by index) copied to the dead-letter
// stream, with the reason of each.
func deadLetteredReads(ctx context.Context, e *env) (map[int]string, error) {
	st, err := e.js.Stream(ctx, e.topo.DLQStream)
	var info *jetstream.StreamInfo
	if err == nil {
		info, err = st.Info(ctx)
	}
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
