package simengine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// KeyHeader is the header a call's idempotency key comes in.
const KeyHeader = "Idempotency-Key"

// maxBodySize is the largest request body the engine reads.
const maxBodySize = 1 << 20

// Engine is a billing rate engine with a capacity. It is an http.Handler,
// safe for concurrent requests, and every method is safe to call from any
// goroutine while it serves.
type Engine struct {
	start time.Time
	now   func() time.Time // the clock of arrivals and waits; tests replace it
	log   *slog.Logger
	check func(r *http.Request, body []byte) error
	keep  func(key string) bool
	rec   bool // Options.Record

	mu          sync.Mutex // guards everything below
	core        core
	serviceTime time.Duration
	jitter      float64
	shedding    Shedding
	retryAfter  []string // shedding's Retry-After header value
	shedRand    *rand.Rand
	jitterRand  *rand.Rand
	answer      func(key string, n int) (int, http.Header)
	refuse      func(key string, n int) (int, http.Header)
	delay       func(key string, n int) time.Duration
	ledger      map[string]*keyCalls
	latencies   []time.Duration // of served calls, in the order they were answered
	arrivals    arrivals
	totals      Stats         // the counters; the live fields are filled in by Stats
	changed     chan struct{} // closed at the next change, when someone awaits one
}

// New validates o and returns an engine. A rejected o yields an error
// wrapping ErrInvalid that names every field at fault.
func New(o Options) (*Engine, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	seeds := o.Rand
	if seeds == nil {
		seeds = rand.New(rand.NewPCG(1, 2))
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		now:         time.Now,
		log:         log,
		check:       o.Check,
		keep:        o.Keep,
		rec:         o.Record,
		core:        core{servers: o.Servers, queueCap: o.Queue},
		serviceTime: o.ServiceTime,
		jitter:      o.Jitter,
		shedRand:    rand.New(rand.NewPCG(seeds.Uint64(), seeds.Uint64())),
		jitterRand:  rand.New(rand.NewPCG(seeds.Uint64(), seeds.Uint64())),
		answer:      o.Answer,
		refuse:      o.Refuse,
		delay:       o.Delay,
		ledger:      make(map[string]*keyCalls),
	}
	e.setShedding(o.Shedding)
	e.start = e.now()
	return e, nil
}

// Capacity returns the calls the engine serves a second when busy:
// Servers / ServiceTime (its mean). It is +Inf for unlimited servers or no
// service time.
func (e *Engine) Capacity() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.core.servers == 0 || e.serviceTime == 0 {
		return math.Inf(1)
	}
	return float64(e.core.servers) / e.serviceTime.Seconds()
}

// SetServers changes how many calls are served in parallel (0: unlimited).
// Raising it starts queued calls at once; lowering it lets the calls being
// served finish, and starts no other until fewer than n are.
func (e *Engine) SetServers(n int) error {
	if err := joined(validServers(n)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.core.servers = n
	e.startQueuedLocked(e.since())
	e.signalLocked()
	return nil
}

// SetQueue changes how many calls may wait for a server. Calls already
// waiting beyond a lowered bound keep their place; new ones are shed until
// the queue is below it.
func (e *Engine) SetQueue(n int) error {
	if err := joined(validQueue(n)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.core.queueCap = n
	return nil
}

// SetServiceTime changes the service time and its jitter for the calls that
// get a server from now on.
func (e *Engine) SetServiceTime(d time.Duration, jitter float64) error {
	if err := joined(validService(d, jitter)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serviceTime, e.jitter = d, jitter
	return nil
}

// SetShedding changes how calls shed from now on are answered.
func (e *Engine) SetShedding(s Shedding) error {
	if err := joined(s.validate()); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setShedding(s)
	return nil
}

func (e *Engine) setShedding(s Shedding) {
	e.shedding = s
	e.retryAfter = []string{s.retryAfterSeconds()}
}

// SetAnswer replaces Options.Answer (nil: 200) for the calls answered from
// now on.
func (e *Engine) SetAnswer(f func(key string, n int) (status int, header http.Header)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = f
}

// SetRefuse replaces Options.Refuse (nil: no call is refused) for the calls
// arriving from now on.
func (e *Engine) SetRefuse(f func(key string, n int) (status int, header http.Header)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refuse = f
}

// SetDelay replaces Options.Delay (nil: none) for the calls served from now
// on.
func (e *Engine) SetDelay(f func(key string, n int) time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delay = f
}

// ServeHTTP takes one call: a POST whose Idempotency-Key header names the
// read. Anything else, or a body Check refuses, is answered 400.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, body, reason := e.request(w, r)
	if reason != "" {
		e.mu.Lock()
		e.totals.BadRequests++
		e.signalLocked()
		e.mu.Unlock()
		e.logAnswer(r, key, 0, http.StatusBadRequest, "bad request", 0)
		writeError(w, http.StatusBadRequest, reason)
		return
	}

	kept := e.keep == nil || e.keep(key)
	var req *request
	if e.rec && kept {
		req = &request{header: r.Header.Clone(), body: body}
	}
	e.mu.Lock()
	at := e.since()
	t := &ticket{at: at}
	e.arrivals.add(at)
	e.totals.Calls++
	kc, idx, n := e.recordLocked(key, kept, at, req)
	if refuse := e.refuse; refuse != nil {
		// Consulted without the lock (it may call Billed), before the call
		// is admitted: a refused call never takes a server nor a queue
		// place.
		e.mu.Unlock()
		if status, header := refuse(key, n); status != 0 {
			e.reject(w, r, kc, idx, key, n, status, header)
			return
		}
		e.mu.Lock()
	}
	adm := e.core.arrive(t)
	switch adm {
	case serve:
		e.startLocked(t, at)
	case wait:
		t.ready = make(chan struct{})
	case shed:
		status, retryAfter := e.drawShedLocked()
		e.settleLocked(kc, idx, Shed, status, 0, 0)
		e.signalLocked()
		e.mu.Unlock()
		if retryAfter != nil {
			w.Header()["Retry-After"] = retryAfter
		}
		e.logAnswer(r, key, n, status, Shed.String(), 0)
		writeBody(w, status, bodyOverloaded)
		return
	}
	e.signalLocked()
	e.mu.Unlock()

	ctx := r.Context()
	if adm == wait {
		select {
		case <-t.ready:
		case <-ctx.Done():
			e.mu.Lock()
			left := e.core.leave(t)
			if left {
				e.settleLocked(kc, idx, Left, 0, e.since()-at, 0)
				e.signalLocked()
			}
			e.mu.Unlock()
			if left {
				e.gone(w, r, key, n, Left)
				return
			}
			// It was given a server as its client left: the service below
			// sees the context ended and frees the server in time.
		}
	}

	answer, delay, served := e.serve(ctx, t)
	if served && delay != nil {
		d := delay(key, n)
		served = d <= 0 || retry.Sleep(ctx, d) == nil
	}
	if !served {
		e.mu.Lock()
		e.settleLocked(kc, idx, Abandoned, 0, t.start-at, 0)
		e.signalLocked()
		e.mu.Unlock()
		e.gone(w, r, key, n, Abandoned)
		return
	}

	status, header := http.StatusOK, http.Header(nil)
	if answer != nil {
		status, header = answer(key, n)
		if status == 0 {
			status = http.StatusOK
		} else if status < 200 || status > 599 {
			status = http.StatusInternalServerError
		}
	}
	e.mu.Lock()
	latency := e.since() - at
	out := Refused
	if status >= 200 && status < 300 {
		out = Billed
		if kc != nil && kc.billed {
			out = Duplicate
		}
	}
	e.settleLocked(kc, idx, out, status, t.start-at, latency)
	e.signalLocked()
	e.mu.Unlock()

	for k, v := range header {
		w.Header()[k] = v
	}
	e.logAnswer(r, key, n, status, out.String(), latency)
	switch out {
	case Billed:
		writeBody(w, status, bodyBilled)
	case Duplicate:
		writeBody(w, status, bodyDuplicate)
	default:
		writeError(w, status, strings.ToLower(http.StatusText(status)))
	}
}

// reject answers a call Refuse refused, at once: status (500 unless in
// [400, 599]) and header; the call is Rejected, with no wait and no latency.
func (e *Engine) reject(w http.ResponseWriter, r *http.Request, kc *keyCalls, idx int, key string, n, status int, header http.Header) {
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	e.mu.Lock()
	e.settleLocked(kc, idx, Rejected, status, 0, 0)
	e.signalLocked()
	e.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	e.logAnswer(r, key, n, status, Rejected.String(), 0)
	writeError(w, status, strings.ToLower(http.StatusText(status)))
}

// serve holds t's server until its service time ends, frees it, and reports
// true with the Answer and Delay in force. When ctx ends first it reports
// false, and the server is freed when the service time ends.
func (e *Engine) serve(ctx context.Context, t *ticket) (answer func(string, int) (int, http.Header), delay func(string, int) time.Duration, served bool) {
	if left := t.service - (e.since() - t.start); left > 0 {
		timer := time.NewTimer(left)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			if left := t.service - (e.since() - t.start); left > 0 {
				time.AfterFunc(left, func() { e.release(t) })
			} else {
				e.release(t)
			}
			return nil, nil, false
		}
	}
	answer, delay = e.release(t)
	return answer, delay, ctx.Err() == nil
}

// release frees t's server, gives it to the call at the head of the queue if
// any, and returns the Answer and Delay in force.
//
// The next call's service counts from when t's was due to end, not from now:
// a timer that fires late, or a goroutine scheduled late, does not make the
// engine serve less than its capacity.
func (e *Engine) release(t *ticket) (func(string, int) (int, http.Header), func(string, int) time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.core.finish()
	e.startQueuedLocked(t.start + t.service)
	e.signalLocked()
	return e.answer, e.delay
}

// startQueuedLocked gives every free server to the calls at the head of the
// queue, their service counted from the later of from and their arrival.
func (e *Engine) startQueuedLocked(from time.Duration) {
	now := e.since()
	for t := e.core.next(); t != nil; t = e.core.next() {
		e.startLocked(t, min(max(from, t.at), now))
		close(t.ready)
	}
}

// startLocked marks t served from now, drawing its service time.
func (e *Engine) startLocked(t *ticket, now time.Duration) {
	t.start = now
	t.service = e.serviceTime
	if e.jitter > 0 && e.serviceTime > 0 {
		spread := (2*e.jitterRand.Float64() - 1) * e.jitter * float64(e.serviceTime)
		t.service += time.Duration(spread)
	}
}

// drawShedLocked draws the status of a shed call and whether it carries
// Retry-After (its value, or nil).
func (e *Engine) drawShedLocked() (int, []string) {
	s := e.shedding
	status := http.StatusServiceUnavailable
	if s.TooManyShare > 0 && e.shedRand.Float64() < s.TooManyShare {
		status = http.StatusTooManyRequests
	}
	var retryAfter []string
	if s.RetryAfterShare > 0 && e.shedRand.Float64() < s.RetryAfterShare {
		retryAfter = e.retryAfter
	}
	if status == http.StatusTooManyRequests {
		e.totals.ShedTooMany++
	} else {
		e.totals.ShedUnavailable++
	}
	if retryAfter != nil {
		e.totals.ShedRetryAfter++
	}
	return status, retryAfter
}

// recordLocked notes a call of key that arrived at at, with its request when
// the engine records them (req, nil otherwise), and returns where it is kept
// (nil for a key not kept) and its number.
func (e *Engine) recordLocked(key string, kept bool, at time.Duration, req *request) (*keyCalls, int, int) {
	if !kept {
		return nil, 0, 0
	}
	kc := e.ledger[key]
	if kc == nil {
		kc = &keyCalls{}
		e.ledger[key] = kc
	}
	kc.calls = append(kc.calls, call{at: at})
	if req != nil {
		kc.requests = append(kc.requests, *req)
	}
	return kc, len(kc.calls) - 1, len(kc.calls)
}

// settleLocked records what became of a call and counts it.
func (e *Engine) settleLocked(kc *keyCalls, idx int, out Outcome, status int, wait, latency time.Duration) {
	switch out {
	case Billed, Duplicate, Refused:
		e.totals.Served++
		e.latencies = append(e.latencies, latency)
	case Shed:
		e.totals.Shed++
	case Rejected:
		e.totals.Rejected++
	case Left:
		e.totals.Left++
	case Abandoned:
		e.totals.Abandoned++
	}
	if kc == nil {
		return
	}
	switch out {
	case Billed:
		kc.billed = true
		e.totals.Billed++
	case Duplicate:
		e.totals.Duplicates++
	case Refused:
		e.totals.Refused++
	}
	kc.calls[idx] = call{at: kc.calls[idx].at, wait: wait, latency: latency, status: int32(status), outcome: out}
}

// since is the time from the engine's start.
func (e *Engine) since() time.Duration { return e.now().Sub(e.start) }

// signalLocked wakes whoever awaits a change.
func (e *Engine) signalLocked() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// request checks r and returns its key and, when Check or Record needs it,
// its body; or the reason it is a bad request. It reads or drains the body,
// so that the server watches the connection (and ends r's context if the
// client goes) while the call waits.
func (e *Engine) request(w http.ResponseWriter, r *http.Request) (key string, body []byte, reason string) {
	if r.Method != http.MethodPost {
		return "", nil, "method " + r.Method + " is not POST"
	}
	key = strings.TrimSpace(r.Header.Get(KeyHeader))
	if key == "" {
		return "", nil, KeyHeader + " header is missing"
	}
	rd := http.MaxBytesReader(w, r.Body, maxBodySize)
	if e.check == nil && !e.rec {
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return key, nil, "reading body: " + err.Error()
		}
		return key, nil, ""
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return key, nil, "reading body: " + err.Error()
	}
	if e.check != nil {
		if err := e.check(r, body); err != nil {
			return key, nil, err.Error()
		}
	}
	return key, body, ""
}

// CheckJSON is a Check that wants what the rate engine's API wants: a JSON
// body sent as application/json.
func CheckJSON(r *http.Request, body []byte) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errors.New("Content-Type is not application/json")
	}
	if !json.Valid(body) {
		return errors.New("body is not JSON")
	}
	return nil
}

// gone answers a call whose client has left (or whose server is closing):
// 503, never an implicit 200, for whoever may still read it.
func (e *Engine) gone(w http.ResponseWriter, r *http.Request, key string, n int, out Outcome) {
	e.logAnswer(r, key, n, 0, out.String(), 0)
	writeBody(w, http.StatusServiceUnavailable, bodyCancelled)
}

func (e *Engine) logAnswer(r *http.Request, key string, n, status int, outcome string, latency time.Duration) {
	if !e.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	e.log.LogAttrs(r.Context(), slog.LevelDebug, "rate engine answered",
		slog.String("idempotency_key", key), slog.Int("n", n), slog.Int("status", status),
		slog.String("outcome", outcome), slog.Duration("latency", latency))
}

var (
	jsonType       = []string{"application/json"}
	bodyBilled     = []byte(`{"status":"billed"}` + "\n")
	bodyDuplicate  = []byte(`{"status":"duplicate"}` + "\n")
	bodyOverloaded = []byte(`{"error":"overloaded"}` + "\n")
	bodyCancelled  = []byte(`{"error":"request cancelled"}` + "\n")
)

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	writeBody(w, status, append(b, '\n'))
}

// Stats returns the totals and the state now.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statsLocked()
}

func (e *Engine) statsLocked() Stats {
	s := e.totals
	s.Busy, s.Queued, s.InSystem, s.MaxInSystem = e.core.busy, e.core.queued, e.core.inSystem(), e.core.maxInSystem
	return s
}

// Await blocks until cond holds for the engine's Stats, or ctx ends (its
// error is returned). cond is called with a snapshot, without the engine's
// lock, at once and after each change: calls arriving, waiting, starting,
// ending, and knobs changing.
func (e *Engine) Await(ctx context.Context, cond func(Stats) bool) error {
	for {
		e.mu.Lock()
		s := e.statsLocked()
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed := e.changed
		e.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Calls returns the calls of key in the order they arrived, with their
// requests' headers and bodies when Options.Record is set; nil for a key
// never seen or not kept.
func (e *Engine) Calls(key string) []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	kc := e.ledger[key]
	if kc == nil {
		return nil
	}
	return e.export(kc)
}

// Billed reports whether key was answered 2xx. It may be called from
// Answer.
func (e *Engine) Billed(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	kc := e.ledger[key]
	return kc != nil && kc.billed
}

// Ledger returns the calls of every key kept, in the order they arrived:
// check that each read was billed exactly once with it.
func (e *Engine) Ledger() map[string][]Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string][]Call, len(e.ledger))
	for k, kc := range e.ledger {
		out[k] = e.export(kc)
	}
	return out
}

func (e *Engine) export(kc *keyCalls) []Call {
	out := make([]Call, len(kc.calls))
	for i, c := range kc.calls {
		out[i] = Call{N: i + 1, At: e.start.Add(c.at), Outcome: c.outcome, Status: int(c.status),
			Wait: c.wait, Latency: c.latency}
		if i < len(kc.requests) {
			out[i].Header, out[i].Body = kc.requests[i].header.Clone(), slices.Clone(kc.requests[i].body)
		}
	}
	return out
}

// Latencies returns the latency of every served call, sorted: from its
// arrival to its answer, so the wait in the queue is in it.
func (e *Engine) Latencies() Latencies {
	e.mu.Lock()
	l := slices.Clone(e.latencies)
	e.mu.Unlock()
	slices.Sort(l)
	return l
}

// Arrivals returns the calls that arrived in each Window since the engine
// was made: the first is [0, 100ms), and so on.
func (e *Engine) Arrivals() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.arrivals.windows()
}

// PeakArrivals returns the most calls that arrived within any Window (the
// window sliding in steps of 10ms): the size of a herd.
func (e *Engine) PeakArrivals() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.arrivals.peak()
}
