package stream_test

// Issue 39: the engine judged by what load does to it. Each test here runs
// the production pipeline (the adaptive limit of 32, the retry budget and
// the breaker as the binary builds them) against a real NATS server and a
// real simengine engine, and asserts what a correct consumer does with an
// engine shape that today's view misjudges: per-read failures answered at
// once, a trickle of reads, one account's quota, a replica joining an
// engine kept full by others, the first calls of a run.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// pausedMsg is the log line of a replica that paused itself.
const pausedMsg = "the rate engine throttles broadly: calls paused"

// production returns o with the pipeline the binary runs at
// --concurrency 32 --retry-base 50ms --retry-cap 400ms --max-attempts 4:
// the adaptive limit (up to 32) and the retry budget as service.Controls
// builds them from config.Default(), and the breaker with the binary's
// defaults (service.BreakerOptions).
func production(t *testing.T, o opts, maxServerWait time.Duration) (opts, *limit.Limiter) {
	t.Helper()
	cfg := config.Default()
	cfg.Consumer.Concurrency = 32
	lim, budg, err := service.Controls(cfg)
	require.NoError(t, err)
	require.NotNil(t, lim, "the binary's default is the adaptive limit")
	require.NotNil(t, budg, "the binary's default is a retry budget")
	o.Concurrency, o.Limiter, o.Budget = 32, lim, budg
	o.Breaker = service.BreakerOptions(cfg.Breaker)
	require.NotNil(t, o.Breaker, "the binary's default has the breaker on")
	o.Policy = retry.Policy{Base: 50 * time.Millisecond, Cap: 400 * time.Millisecond, MaxAttempts: 4, MaxServerWait: maxServerWait}
	return o, lim
}

// uniformLatency is a latency uniform in [5ms, 25ms), drawn for each call
// from a hash of the seed, the key and the call number: the same call gets
// the same latency in every run, whatever the order the calls arrive in.
func uniformLatency(seed uint64, key string, n int) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	u := rand.New(rand.NewPCG(seed^h.Sum64(), uint64(n))).Float64()
	return 5*time.Millisecond + time.Duration(u*float64(20*time.Millisecond))
}

// readKind is what the partial mix's engine does with one read.
type readKind uint8

const (
	kindHealthy   readKind = iota // 200 to every call
	kindFailOnce                  // 503 to its first call, 200 after
	kindTooMany                   // 429 with Retry-After: 1 to its first call, 200 after
	kindAlwaysBad                 // 503 to every call
)

// partialKinds gives each of reads 0..n-1 its kind, per block of 100 reads:
// in each, exactly 15 fail once (503), 3 are throttled once (429,
// Retry-After: 1) and 5 always fail (503), at places drawn from seed. By
// blocks, so that a short run has every kind in each of its parts.
func partialKinds(n int, seed uint64) []readKind {
	r := rand.New(rand.NewPCG(seed, 0x39))
	out := make([]readKind, n)
	for from := 0; from < n; from += 100 {
		size := min(100, n-from)
		perm := r.Perm(size)
		at := 0
		for _, k := range []struct {
			kind readKind
			per  int // of 100
		}{{kindFailOnce, 15}, {kindTooMany, 3}, {kindAlwaysBad, 5}} {
			for range k.per * size / 100 {
				out[from+perm[at]] = k.kind
				at++
			}
		}
	}
	return out
}

// fails reports whether call n of a read of kind k is refused.
func (k readKind) fails(n int) bool {
	switch k {
	case kindFailOnce, kindTooMany:
		return n == 1
	case kindAlwaysBad:
		return true
	}
	return false
}

// partialEngine is an engine of ample capacity (no limit on its servers:
// nothing queues) serving the partial mix: a healthy call takes 5-25ms
// (uniform, seeded), and a read's own failure is answered at once, before
// any rating work, as a real engine's 503 for one tariff whose service is
// down or 429 for one account over its quota is.
func partialEngine(t *testing.T, kinds []readKind, seed uint64) *env {
	t.Helper()
	kindOf := func(key string) readKind {
		i := keyIndex(key)
		if i < 0 || i >= len(kinds) {
			return kindHealthy
		}
		return kinds[i]
	}
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		k := kindOf(key)
		switch {
		case !k.fails(n):
			return http.StatusOK, nil
		case k == kindTooMany:
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
		}
		return http.StatusServiceUnavailable, nil
	})
	e.re.setDelay(func(n int, key string) time.Duration {
		if kindOf(key).fails(n) {
			return 0 // answered at once
		}
		return uniformLatency(seed, key, n)
	})
	return e
}

// pauses is each pause of the replica, as its length.
func pauses(e *env) []time.Duration {
	var out []time.Duration
	for _, p := range e.logs.byMessage(pausedMsg) {
		out = append(out, p.duration("pause").Round(time.Millisecond))
	}
	return out
}

// settledWithin is settled without failing: whether the durable settled
// every read published within timeout.
func (e *env) settledWithin(timeout time.Duration) bool {
	e.t.Helper()
	st, err := e.js.Stream(context.Background(), e.topo.Stream)
	require.NoError(e.t, err)
	deadline := time.Now().Add(timeout)
	for {
		info, err := e.cons.Info(context.Background())
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			si, err := st.Info(context.Background())
			if err == nil && info.AckFloor.Stream >= si.State.LastSeq {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric reads one child of a counter or gauge vector.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	return testutil.ToFloat64(counter(e.t, e, name, labels...))
}

// credited is every failure credited back to its read (not charged an
// attempt), by why: the engine shed broadly, it was down, the breaker.
func (e *env) credited() map[string]float64 {
	e.t.Helper()
	out := map[string]float64{}
	for _, why := range []string{"shedding", "engine_down", "breaker"} {
		out[why] = e.metric("meter_consumer_uncharged_failures_total", "why", why)
	}
	return out
}

// deadLetteredReads is the index of every read in the dead-letter stream,
// by its Dlq-Reason.
func (e *env) deadLetteredReads() map[int]string {
	e.t.Helper()
	out := map[int]string{}
	for i, h := range e.deadLetterHeaders() {
		out[i] = h.Get("Dlq-Reason")
	}
	return out
}

// deadLetterHeaders is the headers of every read's copy in the dead-letter
// stream, by the read's index.
func (e *env) deadLetterHeaders() map[int]nats.Header {
	e.t.Helper()
	out := map[int]nats.Header{}
	for _, m := range e.deadLetters() {
		var r struct {
			MeterID string `json:"meter_id"`
		}
		require.NoError(e.t, json.Unmarshal(m.Data, &r))
		var i int
		_, err := fmt.Sscanf(r.MeterID, "MTR-%d", &i)
		require.NoError(e.t, err)
		out[i] = m.Header
	}
	return out
}

// checkAlwaysBad asserts that each read that always fails was called
// exactly maxAttempts times and dead-lettered exhausted, its copy saying it
// spent them: a read's own failures charged, never credited to the engine
// (a last shed that awaited a trial's verdict included).
func checkAlwaysBad(t *testing.T, e *env, kinds []readKind, maxAttempts int) {
	t.Helper()
	headers := e.deadLetterHeaders()
	dl := map[int]string{}
	for i, h := range headers {
		dl[i] = h.Get("Dlq-Reason")
	}
	var wrong []string
	var calls []int
	bad := 0
	for i, k := range kinds {
		if k != kindAlwaysBad {
			continue
		}
		bad++
		n := len(e.re.Calls(keyOf(i)))
		calls = append(calls, n)
		if spent := headers[i].Get(dlq.HeaderAttempts); n != maxAttempts || dl[i] != "exhausted" || spent != fmt.Sprint(maxAttempts) {
			wrong = append(wrong, fmt.Sprintf("read %d: %d calls, dead-lettered %q, %s attempts spent", i, n, dl[i], spent))
		}
	}
	slices.Sort(calls)
	assert.Empty(t, wrong, "each of the %d reads that always fail is called exactly %d times, then dead-lettered exhausted; wrong: %s (calls, sorted: %v)",
		bad, maxAttempts, some(wrong), calls)
	assert.Len(t, dl, bad, "only the reads that always fail are dead-lettered")
}

// some is the first ten of a list of findings, and how many there are.
func some(findings []string) string {
	if len(findings) <= 10 {
		return fmt.Sprintf("%d: %s", len(findings), strings.Join(findings, "; "))
	}
	return fmt.Sprintf("%d, the first ten: %s", len(findings), strings.Join(findings[:10], "; "))
}

// quantile is the q-quantile of ds by the nearest rank (0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// limitSampler samples the limit every 10ms until stopped.
type limitSampler struct {
	mu      sync.Mutex
	samples []limitSample
	once    sync.Once
	stop    chan struct{}
	done    chan struct{}
}

type limitSample struct {
	at    time.Duration // since the start
	limit int
}

// sampleLimit samples l's limit until end, or the test's end.
func sampleLimit(t *testing.T, l *limit.Limiter) *limitSampler {
	s := &limitSampler{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(s.halt)
	began := time.Now()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			s.mu.Lock()
			s.samples = append(s.samples, limitSample{at: time.Since(began), limit: l.Limit()})
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// halt stops the sampler and waits for it.
func (s *limitSampler) halt() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// end stops the sampler and returns the least limit sampled from after on,
// with when it was first seen, and how many samples there were.
func (s *limitSampler) end(after time.Duration) (least int, at time.Duration, n int) {
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	least = -1
	for _, x := range s.samples {
		if x.at < after {
			continue
		}
		n++
		if least < 0 || x.limit < least {
			least, at = x.limit, x.at
		}
	}
	return least, at, n
}

// median is the median limit sampled from after on (the sampler stopped;
// -1 without samples): the steady state, as the engine matrix reports it,
// where the limit at one instant may be a round's trim by chance.
func (s *limitSampler) median(after time.Duration) int {
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []int
	for _, x := range s.samples {
		if x.at >= after {
			ls = append(ls, x.limit)
		}
	}
	if len(ls) == 0 {
		return -1
	}
	slices.Sort(ls)
	return ls[len(ls)/2]
}

// A backlog of the partial mix against an engine of ample capacity whose
// healthy reads take 5-25ms and whose per-read failures are answered at
// once: 15% of the reads 503 on their first call only, 3% 429 with
// Retry-After: 1 on their first call only, 5% 503 on every call. Each of
// those failures is the read's own: the engine serves every other read at
// the same time, and its latency does not rise with what is in flight. So
// the replica keeps its limit near 32, never pauses, releases every retry
// (the budget binds only on an overloaded engine), credits no failure to
// the engine, calls each read that always fails exactly max_attempts times
// and dead-letters it exhausted, and calls each 429 read again after the
// second it asked for.
//
// Today (issue 39): sheds answered faster than half the latency baseline
// are taken for a load shedder's, so the limit falls to a few calls, the
// retry budget binds, a few 429s pause the whole replica as "broad
// throttling", and the failures of the reads that always fail are credited
// to the engine (more than 4 calls). Measured in seven runs: the limit at
// 1 from the first seconds on, 20-420 retries denied, two to four pauses
// of 1.1-1.5s, 80-115 failures credited, 300-800 of the 1,500 reads
// billed in 10s.
func TestFailuresAnsweredAtOnceAreTheReadsOwn(t *testing.T) {
	t.Parallel()
	const (
		reads = 1500
		seed  = 3901
	)
	kinds := partialKinds(reads, seed)
	e := partialEngine(t, kinds, seed)
	o, l := production(t, e.options(seed), 5*time.Second)
	o.ShutdownTimeout = time.Second // a correct replica is done by the end; today's is not, and its stop need not wait long
	e.publishN(reads)

	began := time.Now()
	samples := sampleLimit(t, l)
	e.start(o)
	// A correct consumer settles this backlog in a few seconds: 1,500
	// reads at 32 calls of 15ms (about 2,000 a second) take under a
	// second, and the slowest reads are the 429s (a second's wait) and the
	// reads that always fail (four calls, delays of at most
	// 50+100+200ms). Today's consumer, given the same mix with the
	// failures answered after the service time instead, settles it in
	// 2.4-3.1s under the race detector on a machine busy with builds. 10s
	// is margin; today's replica, at a call or two in flight and paused,
	// has billed 300-800 reads by then.
	settled := e.settledWithin(10 * time.Second)
	took := time.Since(began)
	endLimit := l.Limit()
	least, leastAt, n := samples.end(time.Second)
	median := samples.median(time.Second)
	if n == 0 { // settled within the first second: nothing to say
		least, median = endLimit, endLimit
	}
	s := e.re.Stats()
	t.Logf("settled=%v in %s: %d calls, %d billed of %d reads; limit at the end %d, median after 1s %d, least %d (at %s, %d samples); credited %v; retries spent %.0f, denied %.0f; pauses %v",
		settled, took.Round(time.Millisecond), s.Calls, s.Billed, reads, endLimit, median, least, leastAt.Round(time.Millisecond), n,
		e.credited(), e.metric("meter_consumer_retries_total", "budget", "spent"),
		e.metric("meter_consumer_retries_total", "budget", "denied"), pauses(e))

	assert.Empty(t, pauses(e), "3% of reads each throttled once is no broad throttling: nothing pauses the replica")
	// The limit: nothing here is load, so it stays near its bound. 24 and
	// 16 leave room for a correct limit that probes downwards now and
	// then (a Vegas- or Gradient-like limit trims a few calls when a round
	// is slow by chance); today's falls to 1. Its median after the first
	// second, not its value at one instant: at the end of the backlog a
	// round slowed by the race detector trimmed it to 22 (CI, 2026-12-05).
	assert.GreaterOrEqual(t, median, 24, "the limit stays near its bound of 32 (median of 10ms samples after the first second)")
	assert.GreaterOrEqual(t, least, 16, "the limit never falls below half its bound after the first second (least %d at %s)", least, leastAt)
	assert.Zero(t, e.metric("meter_consumer_retries_total", "budget", "denied"), "no retry waits on the budget: the engine is not overloaded")
	assert.Zero(t, e.metric("meter_consumer_uncharged_failures_total", "why", "shedding"), "no read's own failure is credited as the engine's shedding")
	assert.Zero(t, e.metric("meter_consumer_uncharged_failures_total", "why", "engine_down"), "nor as the engine down")
	assert.Zero(t, e.metric("meter_consumer_breaker_transitions_total", "to", "open"), "the breaker stays closed")

	// Each 429 read asked for 1s: its second call comes after that second,
	// and not much later. The bar is 1.0-1.5s; every one is held
	// to the floor, nine in ten to 1.5s, and each to 2s: on a busy machine
	// under the race detector, today's consumer given the same mix with
	// the failures answered after the service time (which it mostly judges
	// right) called one or three of the 60 such reads of 2,000 again
	// 1.51-1.56s after their first (p90 1.36s). Today's, as is, calls them
	// again 2.3-3.8s later (p90 3.5s), or not at all.
	var gaps []time.Duration
	var early, late []string
	for i, k := range kinds {
		if k != kindTooMany {
			continue
		}
		c := e.re.Calls(keyOf(i))
		if len(c) < 2 {
			late = append(late, fmt.Sprintf("read %d: %d calls", i, len(c)))
			continue
		}
		gap := c[1].At.Sub(c[0].At)
		gaps = append(gaps, gap)
		switch {
		case gap < time.Second:
			early = append(early, fmt.Sprintf("read %d: %s", i, gap.Round(time.Millisecond)))
		case gap > 2*time.Second:
			late = append(late, fmt.Sprintf("read %d: %s", i, gap.Round(time.Millisecond)))
		}
	}
	p50, p90 := quantile(gaps, 0.5), quantile(gaps, 0.9)
	assert.Empty(t, early, "no 429 read is called again before the 1s it asked for")
	assert.Empty(t, late, "each 429 read is called again within 2s of its first call; not: %s (gaps: p50 %s, p90 %s)",
		some(late), p50.Round(time.Millisecond), p90.Round(time.Millisecond))
	assert.LessOrEqual(t, p90, 1500*time.Millisecond, "nine in ten 429 reads are called again within 1.5s (p50 %s)", p50.Round(time.Millisecond))

	checkAlwaysBad(t, e, kinds, o.Policy.MaxAttempts)
	assert.True(t, settled, "every read settled")
	assert.EqualValues(t, reads-reads*5/100, s.Billed, "every other read billed")
}

// The same mix at a trickle of 10 reads a second (published one every
// 100ms for 10s), failures answered at once: a 2s window then holds about
// 20 calls, a round of 48 latencies takes five seconds. Thin evidence is
// no verdict, and the verdict of a busy replica on the same engine is that
// nothing is load: each read that always fails is called exactly
// max_attempts times and dead-lettered exhausted, nothing pauses, no
// failure is credited to the engine.
//
// Today: once the latency baseline is set (about 5s in), a 503 answered at
// once is a "fast shed", and one fast shed in a window of 20 calls is past
// the 5% that makes the engine overloaded; the read's failure is then
// credited and it is called more than 4 times.
func TestAPartialMixAtATrickleIsJudgedAsWhenBusy(t *testing.T) {
	t.Parallel()
	const (
		reads = 100
		seed  = 3902
	)
	kinds := partialKinds(reads, seed)
	e := partialEngine(t, kinds, seed)
	o, l := production(t, e.options(seed), 5*time.Second)
	e.start(o)
	tick := time.NewTicker(100 * time.Millisecond)
	for i := range reads {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		<-tick.C
	}
	tick.Stop()
	// The last read that always fails needs its four calls (at most
	// 50+100+200ms of delays) after it was published: 3s is ample.
	settled := e.settledWithin(3 * time.Second)
	t.Logf("settled=%v; %d calls; limit %d; credited %v; retries denied %.0f; pauses %v", settled, e.re.total(), l.Limit(),
		e.credited(), e.metric("meter_consumer_retries_total", "budget", "denied"), pauses(e))

	assert.Empty(t, pauses(e), "nothing pauses the replica")
	for why, n := range e.credited() {
		assert.Zero(t, n, "no failure is credited to the engine (%s)", why)
	}
	checkAlwaysBad(t, e, kinds, o.Policy.MaxAttempts)
	assert.True(t, settled, "every read settled")
}

// A trickle of 30 reads (10 a second), of which reads 5-9 belong to one
// account over its quota: their first call is answered 429, Retry-After: 60
// at once. MaxServerWait is 3s. That is one account's quota, not the
// engine's state (the engine serves every other read at the same time): the
// replica does not pause, every other read is billed within a second of
// its publication, and each of the five waits its own Retry-After, clamped
// to 3s, before its second call.
//
// The account's reads are 5-9 so that they are half of the first ten
// calls: a window just heavy enough for today's view (a weight of 10) and
// half shed. Today that is taken for an overloaded engine throttling
// broadly, and the whole replica pauses for the longest wait asked
// (clamped to 3s): the reads published during the pause wait it out.
func TestOneAccountsQuotaDoesNotPauseTheReplica(t *testing.T) {
	t.Parallel()
	const (
		reads = 30
		seed  = 3903
	)
	account := func(i int) bool { return i >= 5 && i <= 9 }
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		if n == 1 && account(keyIndex(key)) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}
		}
		return http.StatusOK, nil
	})
	e.re.setDelay(func(n int, key string) time.Duration {
		if n == 1 && account(keyIndex(key)) {
			return 0 // the quota is checked before any rating work
		}
		return uniformLatency(seed, key, n)
	})
	const clamp = 3 * time.Second
	o, _ := production(t, e.options(seed), clamp)
	e.start(o)
	published := make([]time.Time, reads)
	tick := time.NewTicker(100 * time.Millisecond)
	for i := range reads {
		published[i] = time.Now()
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		<-tick.C
	}
	tick.Stop()
	// The account's last read was published about 2.1s ago; its second
	// call is due 3s after its first. 5s is ample.
	settled := e.settledWithin(5 * time.Second)
	t.Logf("settled=%v; pauses %v; credited %v", settled, pauses(e), e.credited())

	assert.Empty(t, pauses(e), "one account's quota pauses nothing")
	// Billed within a second of publication: a correct replica bills a
	// read of 5-25ms in a few tens of milliseconds at this trickle; a
	// second leaves room for a pull's latency and the race detector, and
	// is well under the 3s a pause holds a read.
	var slow []string
	for i := range reads {
		if account(i) {
			continue
		}
		c := e.re.Calls(keyOf(i))
		if len(c) == 0 || c[len(c)-1].Status != http.StatusOK {
			slow = append(slow, fmt.Sprintf("read %d: not billed (%d calls)", i, len(c)))
			continue
		}
		last := c[len(c)-1]
		if took := last.At.Add(last.Latency).Sub(published[i]); took > time.Second {
			slow = append(slow, fmt.Sprintf("read %d: billed %s after publication", i, took.Round(time.Millisecond)))
		}
	}
	assert.Empty(t, slow, "each of the %d other reads is billed within 1s of its publication; not: %s", reads-5, some(slow))
	for i := range reads {
		if !account(i) {
			continue
		}
		c := e.re.Calls(keyOf(i))
		if !assert.Len(t, c, 2, "read %d: throttled once, then billed", i) {
			continue
		}
		gap := c[1].At.Sub(c[0].At)
		assert.GreaterOrEqual(t, gap, clamp, "read %d waits its own Retry-After, clamped to max_server_wait", i)
		assert.Less(t, gap, clamp+1500*time.Millisecond, "read %d waits the clamp, not 60s", i)
	}
	assert.True(t, settled, "every read settled")
}

// A replica joining an engine kept full by others: 2 servers of 20ms (100
// calls a second) and a queue of 8, kept full by four plain HTTP clients
// of 4 calls in flight each (16 calls against a room of 10), each calling
// again at once after an answer and 5ms after a shed (answered 503 at
// once), started half a second before the replica. The engine serves all
// the time, just not every call: a shed is its load, never an outage, so
// the replica's breaker (the binary's defaults) must not open, and the
// replica keeps getting reads billed.
//
// On the code before issue 39 (measured: 47 and 56 calls, 0 reads billed,
// one and two openings, as the 47 calls and 1 opening): before
// the replica's first 2xx, during its own pauses and in a thin window its
// view said the engine was not serving, so every shed of a fresh read
// counted for the breaker, which counted calls, not time: 10 of its first
// 20 calls shed at once before the first queued one returned opened it
// (its half-open probes, judged in the same blind spot, reopened it).
//
// Not parallel: the other clients' 16 loops take a share of a CPU under
// the race detector; beside another test they would slow it and be slowed
// by it, leaving the engine less full.
func TestAReplicaJoiningAFullEngineDoesNotOpenItsBreaker(t *testing.T) {
	billed := 0
	for world := range 2 {
		t.Run(fmt.Sprint("world", world), func(t *testing.T) { billed += joinFullEngine(t, uint64(3904+world)) })
	}
	// Its share: the engine serves about 500 calls in each world's 5s, and
	// the four others hold 16 calls in it (calling again 5ms after a shed)
	// against the replica's few: 7-58 reads a world measured, 45-80 over
	// two, where the code before issue 39 billed none (its breaker open).
	// 20 over two worlds says the replica kept being served at a steady
	// rate, not a read now and then, with room for one unlucky world.
	assert.GreaterOrEqual(t, billed, 20, "the replica gets reads billed while the others keep the engine full")
}

// joinFullEngine is one world of
// TestAReplicaJoiningAFullEngineDoesNotOpenItsBreaker.
func joinFullEngine(t *testing.T, seed uint64) (billed int) {
	const (
		reads = 100
		watch = 5 * time.Second
	)
	e := newEnv(t, nil)
	eng, err := simengine.New(simengine.Options{Servers: 2, ServiceTime: 20 * time.Millisecond, Queue: 8,
		Rand: rand.New(rand.NewPCG(seed, 1)), Keep: func(key string) bool { return strings.HasPrefix(key, "MTR-") }})
	require.NoError(t, err)
	srv := simengine.NewServer(eng)
	t.Cleanup(srv.Close)
	o, _ := production(t, e.options(seed), 5*time.Second)
	sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Concurrency: 64})
	require.NoError(t, err)
	o.Sink = sink
	o.ShutdownTimeout = time.Second
	e.publishN(reads)

	// The other clients: 4 of 4 calls in flight, 16 loops in all.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 4 {
		for g := range 4 {
			wg.Go(func() { keepCalling(ctx, srv.URL, fmt.Sprintf("OTHER-%d-%d-", c, g)) })
		}
	}
	stopOthers := func() { cancel(); wg.Wait() }
	t.Cleanup(stopOthers) // before srv.Close: cleanups run last first
	time.Sleep(500 * time.Millisecond)
	before := eng.Stats()

	began := time.Now()
	e.start(o)
	time.Sleep(watch)
	calls := 0
	for key, cs := range eng.Ledger() {
		if !strings.HasPrefix(key, "MTR-") {
			continue
		}
		calls += len(cs)
		if slices.ContainsFunc(cs, func(c simengine.Call) bool { return c.Outcome == simengine.Billed }) {
			billed++
		}
	}
	after := eng.Stats()
	opened := e.metric("meter_consumer_breaker_transitions_total", "to", "open")
	t.Logf("in %s: the engine served %d calls (%d shed); the replica made %d calls, %d reads billed; breaker opened %.0f times, state %.0f; credited %v",
		time.Since(began).Round(time.Millisecond), after.Served-before.Served, after.Shed-before.Shed, calls, billed, opened,
		e.metric("meter_consumer_breaker_state"), e.credited())
	stopOthers()

	assert.Zero(t, opened, "the engine serves all the time: its sheds are its load, not an outage, and the breaker stays closed")
	return billed
}

// keepCalling is one of the other clients of a full engine: one call in
// flight on a kept-alive connection, a new key each call, again 5ms after
// a shed and at once after an answer, until ctx ends. It writes HTTP/1.1
// by hand: net/http's client costs so much more under the race detector
// that 16 of its loops could not keep the engine full on a busy machine.
func keepCalling(ctx context.Context, url, prefix string) {
	addr := strings.TrimPrefix(url, "http://")
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for k := 0; ctx.Err() == nil; k++ {
		if conn == nil {
			var err error
			if conn, err = net.Dial("tcp", addr); err != nil {
				return
			}
			br = bufio.NewReader(conn)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		_, err := fmt.Fprintf(conn, "POST /rate HTTP/1.1\r\nHost: engine\r\nIdempotency-Key: %s%d\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", prefix, k)
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			_ = conn.Close()
			conn = nil
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// The first calls of a run are no verdict: 60 reads where reads 5-9 always
// get 503 (at once) and the others 200 after 5-25ms. Each of reads 5-9 is
// called exactly max_attempts times and dead-lettered exhausted, none of
// its failures credited to the engine.
//
// Today: the limit starts at one call and doubles; the first ten calls are
// reads 0-9, half of them shed, and at a weight of 10 the view takes a 50%
// shed share at face value (Overloaded, ORed into Shedding, cancelling the
// margin Shedding gives chance): a read's failure is credited and it is
// called a fifth time (or, the view judging on, a dozen). It depends on
// the order the first calls return in (in 130 worlds run alone, 42
// credited), so the test runs twenty fresh worlds, each with its own seed.
func TestTheFirstCallsOfARunAreNoVerdict(t *testing.T) {
	t.Parallel()
	const (
		reads = 60
		runs  = 20
	)
	bad := func(i int) bool { return i >= 5 && i <= 9 }
	kinds := make([]readKind, reads)
	for i := range kinds {
		if bad(i) {
			kinds[i] = kindAlwaysBad
		}
	}
	for run := range runs {
		t.Run(fmt.Sprint("run", run), func(t *testing.T) {
			t.Parallel()
			seed := uint64(3905 + run)
			e := partialEngine(t, kinds, seed)
			o, _ := production(t, e.options(seed), 5*time.Second)
			e.publishN(reads)
			e.start(o)
			// 60 reads of 5-25ms and four calls of the bad ones, delays
			// of at most 350ms in all: about half a second.
			settled := e.settledWithin(8 * time.Second)
			var calls []int
			for i := range reads {
				if bad(i) {
					calls = append(calls, len(e.re.Calls(keyOf(i))))
				}
			}
			// Each last shed meanwhile a trial ran awaited its verdict
			// (Record.Awaiting), credited until then: the reads' own,
			// dead-lettered without another call.
			t.Logf("settled=%v; calls of reads 5-9: %v; credited %v; awaited a verdict %v", settled, calls, e.credited(),
				e.metric("meter_consumer_uncharged_failures_total", "why", "trial"))
			for why, n := range e.credited() {
				assert.Zero(t, n, "no failure of reads 5-9 is credited to the engine (%s)", why)
			}
			checkAlwaysBad(t, e, kinds, o.Policy.MaxAttempts)
			assert.True(t, settled, "every read settled")
		})
	}
}
