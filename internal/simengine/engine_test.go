package simengine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// Calls held by a long service time fill the servers, then the queue; the
// rest are shed at once. When their clients give up, the queued ones leave
// unserved and the served ones are abandoned: nothing is billed.
func TestShedsPastTheQueue(t *testing.T) {
	tests := []struct {
		name           string
		servers, queue int
		calls          int
		wantBusy       int
		wantQueued     int
	}{
		{"two servers, three queued", 2, 3, 10, 2, 3},
		{"no queue", 1, 0, 4, 1, 0},
		{"room for all", 3, 10, 5, 3, 2},
		{"unlimited servers", 0, 0, 10, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, simengine.Options{Servers: tt.servers, Queue: tt.queue, ServiceTime: time.Hour})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			answers := make(chan answer, tt.calls)
			var wg sync.WaitGroup
			for i := range tt.calls {
				wg.Go(func() { answers <- post(ctx, s, fmt.Sprintf("k%d", i)) })
			}
			inSystem := tt.wantBusy + tt.wantQueued
			wantShed := tt.calls - inSystem
			await(t, s, func(st simengine.Stats) bool { return st.Calls == int64(tt.calls) })

			// Every shed call has its answer already; none other has one.
			for range wantShed {
				a := <-answers
				require.NoError(t, a.err)
				assert.Equal(t, http.StatusServiceUnavailable, a.status, a.key)
			}
			st := s.Stats()
			assert.Equal(t, tt.wantBusy, st.Busy, "busy")
			assert.Equal(t, tt.wantQueued, st.Queued, "queued")
			assert.Equal(t, inSystem, st.InSystem, "in system")
			assert.Equal(t, inSystem, st.MaxInSystem, "max in system")
			assert.EqualValues(t, wantShed, st.Shed, "shed")
			assert.EqualValues(t, wantShed, st.ShedUnavailable, "shed with 503")
			assert.Zero(t, st.Served)
			assert.Empty(t, answers, "a call in the system is not answered")

			cancel()
			wg.Wait()
			await(t, s, func(st simengine.Stats) bool { return st.Left+st.Abandoned == int64(inSystem) })
			st = s.Stats()
			assert.EqualValues(t, tt.wantQueued, st.Left, "queued calls leave unserved")
			assert.EqualValues(t, tt.wantBusy, st.Abandoned, "served calls are abandoned")
			assert.Equal(t, tt.wantBusy, st.Busy, "an abandoned call holds its server until its service time ends")
			assert.Zero(t, st.Queued)
			assert.Zero(t, st.Billed)
			counts := map[simengine.Outcome]int{}
			for key, calls := range s.Ledger() {
				require.Len(t, calls, 1, key)
				c := calls[0]
				counts[c.Outcome]++
				if c.Outcome == simengine.Shed {
					assert.Equal(t, http.StatusServiceUnavailable, c.Status, key)
				} else {
					assert.Zero(t, c.Status, "%s: nobody was there to answer", key)
				}
			}
			assert.Equal(t, wantShed, counts[simengine.Shed], "shed")
			assert.Equal(t, tt.wantQueued, counts[simengine.Left], "left")
			assert.Equal(t, tt.wantBusy, counts[simengine.Abandoned], "abandoned")
		})
	}
}

// A queued call is answered only once served: its wait is in its latency.
// The first call holds the only server for an hour; the second waits until
// a second server is added, then is served for its service time.
func TestQueuedCallsWait(t *testing.T) {
	const service = 50 * time.Millisecond
	s := start(t, simengine.Options{Servers: 1, Queue: 1, ServiceTime: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan answer, 1)
	go func() { held <- post(ctx, s, "a") }()
	await(t, s, func(st simengine.Stats) bool { return st.Busy == 1 })
	sent := time.Now()
	queued := make(chan answer, 1)
	go func() { queued <- post(t.Context(), s, "b") }()
	await(t, s, func(st simengine.Stats) bool { return st.Queued == 1 })
	assert.Equal(t, 2, s.Stats().MaxInSystem)

	require.NoError(t, s.SetServiceTime(service, 0))
	require.NoError(t, s.SetServers(2))
	b := <-queued
	elapsed := time.Since(sent)
	require.NoError(t, b.err)
	require.Equal(t, http.StatusOK, b.status)
	cancel()
	<-held

	calls := s.Calls("b")
	require.Len(t, calls, 1)
	c := calls[0]
	assert.Equal(t, simengine.Billed, c.Outcome)
	assert.Positive(t, c.Wait, "it waited for a server")
	assert.GreaterOrEqual(t, c.Latency, c.Wait+service, "its latency is its wait and its service")
	assert.GreaterOrEqual(t, elapsed, c.Latency, "the client waited all of it")
	l := s.Latencies()
	require.Len(t, l, 1)
	assert.Equal(t, c.Latency, l.Quantile(0.99))
}

// Under a saturating load the engine serves no faster than its capacity:
// calls go through each server one after another.
func TestCapacityBoundsThroughput(t *testing.T) {
	const (
		servers = 2
		service = 10 * time.Millisecond
		calls   = 40
	)
	s := start(t, simengine.Options{Servers: servers, Queue: calls, ServiceTime: service})
	assert.InDelta(t, 200.0, s.Capacity(), 1e-9)

	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			a := post(t.Context(), s, fmt.Sprintf("k%d", i))
			assert.NoError(t, a.err)
			assert.Equal(t, http.StatusOK, a.status)
		})
	}
	wg.Wait()
	var first, last time.Time
	for _, cs := range s.Ledger() {
		c := cs[0]
		if first.IsZero() || c.At.Before(first) {
			first = c.At
		}
		if end := c.At.Add(c.Latency); end.After(last) {
			last = end
		}
	}
	span := last.Sub(first)
	assert.GreaterOrEqual(t, span, calls/servers*service, "no faster than Servers/ServiceTime")
	st := s.Stats()
	assert.EqualValues(t, calls, st.Billed)
	assert.LessOrEqual(t, st.MaxInSystem, calls)
	t.Logf("%d calls in %v: %.0f/s against a capacity of %.0f/s; p50 %v, p99 %v",
		calls, span, calls/span.Seconds(), s.Capacity(), s.Latencies().Quantile(0.5), s.Latencies().Quantile(0.99))
}

// The shedding answers come from the engine's seeded source: the same seed
// gives the same answers in the same order, and the shares are drawn call
// by call.
func TestSheddingIsSeeded(t *testing.T) {
	const n = 200
	shedAll := func(seed uint64, jitter float64) (statuses []int, retryAfter []string, st simengine.Stats) {
		s := start(t, simengine.Options{
			Servers: 1, ServiceTime: time.Hour, Jitter: jitter,
			Shedding: simengine.Shedding{TooManyShare: 0.25, RetryAfterShare: 0.2, RetryAfter: 1500 * time.Millisecond},
			Rand:     rand.New(rand.NewPCG(seed, 7)),
		})
		ctx, cancel := context.WithCancel(t.Context())
		held := make(chan answer, 1)
		go func() { held <- post(ctx, s, "held") }()
		await(t, s, func(st simengine.Stats) bool { return st.Busy == 1 })
		for i := range n {
			a := post(t.Context(), s, "k"+strconv.Itoa(i))
			require.NoError(t, a.err)
			statuses = append(statuses, a.status)
			retryAfter = append(retryAfter, a.header.Get("Retry-After"))
		}
		cancel()
		<-held
		return statuses, retryAfter, s.Stats()
	}

	statuses, retryAfter, st := shedAll(2026, 0)
	count := map[string]int{}
	for i := range statuses {
		count[strconv.Itoa(statuses[i])]++
		if retryAfter[i] != "" {
			assert.Equal(t, "2", retryAfter[i], "1.5s is sent as 2 whole seconds")
			count["Retry-After"]++
		}
	}
	assert.Equal(t, map[string]int{"503": 157, "429": 43, "Retry-After": 46}, count)
	assert.EqualValues(t, n, st.Shed)
	assert.EqualValues(t, count["503"], st.ShedUnavailable)
	assert.EqualValues(t, count["429"], st.ShedTooMany)
	assert.EqualValues(t, count["Retry-After"], st.ShedRetryAfter)

	again, retryAgain, _ := shedAll(2026, 1)
	assert.Equal(t, statuses, again, "the same seed, the same answers, whatever the jitter draws")
	assert.Equal(t, retryAfter, retryAgain)
	other, _, _ := shedAll(2027, 0)
	assert.NotEqual(t, statuses, other, "another seed, other answers")
}

// Per key, the engine keeps every call with what became of it; a 2xx for a
// key already billed is a duplicate, not a second bill.
func TestLedger(t *testing.T) {
	s := start(t, simengine.Options{
		Answer: func(key string, n int) (int, http.Header) {
			switch {
			case key == "a" && n == 1:
				return http.StatusServiceUnavailable, http.Header{"Retry-After": {"3"}}
			case key == "b":
				return http.StatusUnprocessableEntity, nil
			}
			return 0, nil // 200
		},
	})
	posts := []struct {
		key        string
		wantStatus int
		wantHeader string
	}{
		{"a", http.StatusServiceUnavailable, "3"},
		{"a", http.StatusOK, ""},
		{"a", http.StatusOK, ""},
		{"b", http.StatusUnprocessableEntity, ""},
		{"b", http.StatusUnprocessableEntity, ""},
		{"c", http.StatusOK, ""},
	}
	for i, p := range posts {
		a := post(t.Context(), s, p.key)
		require.NoError(t, a.err)
		assert.Equal(t, p.wantStatus, a.status, "post %d", i)
		assert.Equal(t, p.wantHeader, a.header.Get("Retry-After"), "post %d", i)
	}

	tests := []struct {
		key          string
		wantOutcomes []simengine.Outcome
		wantStatuses []int
		wantBilled   bool
	}{
		{"a", []simengine.Outcome{simengine.Refused, simengine.Billed, simengine.Duplicate}, []int{503, 200, 200}, true},
		{"b", []simengine.Outcome{simengine.Refused, simengine.Refused}, []int{422, 422}, false},
		{"c", []simengine.Outcome{simengine.Billed}, []int{200}, true},
		{"never", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			calls := s.Calls(tt.key)
			assert.Equal(t, tt.wantOutcomes, nilIfEmpty(outcomes(calls)))
			for i, c := range calls {
				assert.Equal(t, i+1, c.N)
				assert.Equal(t, tt.wantStatuses[i], c.Status)
			}
			assert.Equal(t, tt.wantBilled, s.Billed(tt.key))
		})
	}
	st := s.Stats()
	assert.EqualValues(t, 6, st.Calls)
	assert.EqualValues(t, 6, st.Served)
	assert.EqualValues(t, 2, st.Billed)
	assert.EqualValues(t, 1, st.Duplicates)
	assert.EqualValues(t, 3, st.Refused)
	assert.Len(t, s.Ledger(), 3)
	assert.Len(t, s.Latencies(), 6)
}

func nilIfEmpty(o []simengine.Outcome) []simengine.Outcome {
	if len(o) == 0 {
		return nil
	}
	return o
}

// Refuse answers a call at once as it arrives, after the ledger counted it
// (n numbers it among its key's calls, as Answer's does) and before it is
// admitted: the call is Rejected, with Refuse's status and headers, no wait,
// no latency, and no place in Latencies. A status of 0 lets it go on to
// Answer; a status that is not a failure (outside 400-599) is answered 500,
// never billed.
func TestRefuse(t *testing.T) {
	retryAfter60 := http.Header{"Retry-After": {"60"}}
	tests := []struct {
		name           string
		refuse         func(key string, n int) (int, http.Header)
		posts          []string // keys, posted one after another
		wantStatuses   []int
		wantRetryAfter []string // by post; "" for none
		wantOutcomes   map[string][]simengine.Outcome
		wantNs         map[string][]int // the n Refuse was given, by key
		wantRejected   int64
		wantBilled     int64
	}{
		{
			name: "first call refused, the second served",
			refuse: func(_ string, n int) (int, http.Header) {
				if n == 1 {
					return http.StatusServiceUnavailable, nil
				}
				return 0, nil
			},
			posts:          []string{"a", "a", "b", "a"},
			wantStatuses:   []int{503, 200, 503, 200},
			wantRetryAfter: []string{"", "", "", ""},
			wantOutcomes: map[string][]simengine.Outcome{
				"a": {simengine.Rejected, simengine.Billed, simengine.Duplicate},
				"b": {simengine.Rejected},
			},
			wantNs:       map[string][]int{"a": {1, 2, 3}, "b": {1}},
			wantRejected: 2, wantBilled: 1,
		},
		{
			name: "one account over its quota: 429 with Retry-After, every call",
			refuse: func(key string, _ int) (int, http.Header) {
				if strings.HasPrefix(key, "acct-") {
					return http.StatusTooManyRequests, retryAfter60
				}
				return 0, nil
			},
			posts:          []string{"acct-1", "other", "acct-1"},
			wantStatuses:   []int{429, 200, 429},
			wantRetryAfter: []string{"60", "", "60"},
			wantOutcomes: map[string][]simengine.Outcome{
				"acct-1": {simengine.Rejected, simengine.Rejected},
				"other":  {simengine.Billed},
			},
			wantNs:       map[string][]int{"acct-1": {1, 2}, "other": {1}},
			wantRejected: 2, wantBilled: 1,
		},
		{
			name:           "a 2xx is not a refusal: answered 500, never billed",
			refuse:         func(string, int) (int, http.Header) { return http.StatusCreated, nil },
			posts:          []string{"k"},
			wantStatuses:   []int{500},
			wantRetryAfter: []string{""},
			wantOutcomes:   map[string][]simengine.Outcome{"k": {simengine.Rejected}},
			wantNs:         map[string][]int{"k": {1}},
			wantRejected:   1,
		},
		{
			name:           "a negative status is answered 500",
			refuse:         func(string, int) (int, http.Header) { return -1, nil },
			posts:          []string{"k"},
			wantStatuses:   []int{500},
			wantRetryAfter: []string{""},
			wantOutcomes:   map[string][]simengine.Outcome{"k": {simengine.Rejected}},
			wantNs:         map[string][]int{"k": {1}},
			wantRejected:   1,
		},
		{
			name:           "0 refuses nothing",
			refuse:         func(string, int) (int, http.Header) { return 0, nil },
			posts:          []string{"k", "l"},
			wantStatuses:   []int{200, 200},
			wantRetryAfter: []string{"", ""},
			wantOutcomes:   map[string][]simengine.Outcome{"k": {simengine.Billed}, "l": {simengine.Billed}},
			wantNs:         map[string][]int{"k": {1}, "l": {1}},
			wantBilled:     2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			ns := map[string][]int{}
			s := start(t, simengine.Options{
				ServiceTime: time.Millisecond,
				Refuse: func(key string, n int) (int, http.Header) {
					mu.Lock()
					ns[key] = append(ns[key], n)
					mu.Unlock()
					return tt.refuse(key, n)
				},
			})
			for i, key := range tt.posts {
				a := post(t.Context(), s, key)
				require.NoError(t, a.err)
				assert.Equal(t, tt.wantStatuses[i], a.status, "post %d (%s)", i, key)
				assert.Equal(t, tt.wantRetryAfter[i], a.header.Get("Retry-After"), "post %d (%s)", i, key)
			}
			mu.Lock()
			assert.Equal(t, tt.wantNs, ns)
			mu.Unlock()
			for key, want := range tt.wantOutcomes {
				calls := s.Calls(key)
				assert.Equal(t, want, outcomes(calls), key)
				for _, c := range calls {
					if c.Outcome == simengine.Rejected {
						assert.Zero(t, c.Wait, "%s: answered at once", key)
						assert.Zero(t, c.Latency, "%s: answered at once", key)
						assert.NotZero(t, c.Status, key)
					}
				}
			}
			st := s.Stats()
			assert.EqualValues(t, len(tt.posts), st.Calls)
			assert.Equal(t, tt.wantRejected, st.Rejected, "rejected")
			assert.Equal(t, tt.wantBilled, st.Billed, "billed")
			assert.Zero(t, st.Shed, "a rejected call is not shed")
			assert.Zero(t, st.Refused, "nor refused after its service")
			assert.Equal(t, st.Calls, st.Served+st.Shed+st.Rejected+st.Left+st.Abandoned, "every call ends one way")
			assert.Len(t, s.Latencies(), int(st.Served), "only served calls have a latency")
		})
	}
}

// A refused call takes no server and no queue place: an engine whose only
// server is busy and whose queue is full refuses at once, and sheds only the
// calls Refuse lets through.
func TestRefusedCallTakesNoServer(t *testing.T) {
	s := start(t, simengine.Options{
		Servers: 1, Queue: 0, ServiceTime: time.Hour,
		Refuse: func(key string, _ int) (int, http.Header) {
			if strings.HasPrefix(key, "refused") {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}
			}
			return 0, nil
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan answer, 1)
	go func() { held <- post(ctx, s, "held") }()
	await(t, s, func(st simengine.Stats) bool { return st.Busy == 1 })

	for i := range 3 {
		a := post(t.Context(), s, fmt.Sprintf("refused-%d", i))
		require.NoError(t, a.err)
		assert.Equal(t, http.StatusTooManyRequests, a.status, "refused at once, the server busy")
		assert.Equal(t, "60", a.header.Get("Retry-After"))
	}
	st := s.Stats()
	assert.Equal(t, 1, st.Busy, "the refused calls took no server")
	assert.Equal(t, 1, st.InSystem)
	assert.Equal(t, 1, st.MaxInSystem, "nor a place in the system")
	assert.EqualValues(t, 3, st.Rejected)
	assert.Zero(t, st.Shed)

	a := post(t.Context(), s, "let-through")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "a call Refuse lets through meets the full engine")
	assert.Equal(t, []simengine.Outcome{simengine.Shed}, outcomes(s.Calls("let-through")))

	cancel()
	<-held
	await(t, s, func(st simengine.Stats) bool { return st.Abandoned == 1 })
	st = s.Stats()
	assert.EqualValues(t, 5, st.Calls)
	assert.Equal(t, st.Calls, st.Served+st.Shed+st.Rejected+st.Left+st.Abandoned)
	assert.Empty(t, s.Latencies(), "no call was served")
}

// A request that is not a call is answered 400 and is not counted as one.
func TestBadRequests(t *testing.T) {
	tests := []struct {
		name   string
		check  func(*http.Request, []byte) error
		method string
		ctype  string
		key    string
		body   string
		want   string // in the 400's body; "" for a call
	}{
		{"GET", nil, http.MethodGet, "application/json", "k", readBody, "method GET"},
		{"no key", nil, http.MethodPost, "application/json", "", readBody, "Idempotency-Key"},
		{"blank key", nil, http.MethodPost, "application/json", "  ", readBody, "Idempotency-Key"},
		{"any body without a check", nil, http.MethodPost, "text/plain", "k", "not json", ""},
		{"JSON check: text", simengine.CheckJSON, http.MethodPost, "text/plain", "k", readBody, "Content-Type"},
		{"JSON check: not JSON", simengine.CheckJSON, http.MethodPost, "application/json", "k", `{"meter_id":`, "not JSON"},
		{"JSON check: charset", simengine.CheckJSON, http.MethodPost, "application/json; charset=utf-8", "k", readBody, ""},
		{"body too large", simengine.CheckJSON, http.MethodPost, "application/json", "k", strings.Repeat(" ", 1<<20+1), "reading body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := simengine.New(simengine.Options{Check: tt.check})
			require.NoError(t, err)
			req := httptest.NewRequestWithContext(t.Context(), tt.method, "/reads", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.ctype)
			if tt.key != "" {
				req.Header.Set(simengine.KeyHeader, tt.key)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			st := e.Stats()
			if tt.want == "" {
				assert.Equal(t, http.StatusOK, rec.Code)
				assert.EqualValues(t, 1, st.Calls)
				assert.Zero(t, st.BadRequests)
				return
			}
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.want)
			assert.EqualValues(t, 1, st.BadRequests)
			assert.Zero(t, st.Calls)
			assert.Empty(t, e.Ledger())
		})
	}
}

// Check sees every call's request and body before it enters the engine: a
// test records what it needs there.
func TestCheckSeesTheRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	s := start(t, simengine.Options{Check: func(r *http.Request, body []byte) error {
		mu.Lock()
		defer mu.Unlock()
		seen[r.Header.Get(simengine.KeyHeader)] = string(body)
		return nil
	}})
	require.NoError(t, post(t.Context(), s, "k").err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]string{"k": readBody}, seen)
}

// Record keeps each call's request headers and body with the call, as
// copies the caller may change; only the calls of keys kept, never a bad
// request, and nothing without Record.
func TestRecord(t *testing.T) {
	serve := func(e *simengine.Engine, method, key, body, trace string) {
		req := httptest.NewRequestWithContext(t.Context(), method, "/reads", strings.NewReader(body))
		req.Header.Set(simengine.KeyHeader, key)
		req.Header.Set("Traceparent", trace)
		e.ServeHTTP(httptest.NewRecorder(), req)
	}
	e, err := simengine.New(simengine.Options{Record: true, Keep: func(key string) bool { return key != "other" }})
	require.NoError(t, err)
	serve(e, http.MethodPost, "k", `{"n":1}`, "t1")
	serve(e, http.MethodGet, "k", `{"n":"get"}`, "t-get") // a bad request
	serve(e, http.MethodPost, "k", `{"n":2}`, "t2")
	serve(e, http.MethodPost, "other", `{"n":3}`, "t3")

	calls := e.Calls("k")
	require.Len(t, calls, 2)
	for i, want := range []struct{ body, trace string }{{`{"n":1}`, "t1"}, {`{"n":2}`, "t2"}} {
		assert.Equal(t, want.body, string(calls[i].Body), "call %d", i+1)
		assert.Equal(t, want.trace, calls[i].Header.Get("Traceparent"), "call %d", i+1)
		assert.Equal(t, "k", calls[i].Header.Get(simengine.KeyHeader), "call %d", i+1)
	}
	assert.Equal(t, calls, e.Ledger()["k"])
	assert.Nil(t, e.Calls("other"), "a key not kept is not recorded")
	calls[0].Header.Set("Traceparent", "changed")
	calls[0].Body[0] = 'x'
	again := e.Calls("k")
	assert.Equal(t, "t1", again[0].Header.Get("Traceparent"), "the engine's record is its own")
	assert.Equal(t, `{"n":1}`, string(again[0].Body), "the engine's record is its own")

	e, err = simengine.New(simengine.Options{})
	require.NoError(t, err)
	serve(e, http.MethodPost, "k", `{"n":1}`, "t1")
	require.Len(t, e.Calls("k"), 1)
	assert.Nil(t, e.Calls("k")[0].Header, "nothing recorded without Record")
	assert.Nil(t, e.Calls("k")[0].Body, "nothing recorded without Record")
}

// Delay makes a call slow without holding its server: another call is
// served meanwhile. A client that leaves during it abandons the call.
func TestDelayHoldsNoServer(t *testing.T) {
	s := start(t, simengine.Options{
		Servers: 1, Queue: 0,
		Delay: func(key string, n int) time.Duration {
			if key == "slow" {
				return time.Hour
			}
			return 0
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	slow := make(chan answer, 1)
	go func() { slow <- post(ctx, s, "slow") }()
	await(t, s, func(st simengine.Stats) bool { return st.Calls == 1 && st.Busy == 0 })

	a := post(t.Context(), s, "fast")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.status, "served while the slow call is in its delay")

	cancel()
	<-slow
	await(t, s, func(st simengine.Stats) bool { return st.Abandoned == 1 })
	assert.Equal(t, []simengine.Outcome{simengine.Abandoned}, outcomes(s.Calls("slow")))
	assert.False(t, s.Billed("slow"))
	assert.EqualValues(t, 1, s.Stats().Billed)
}

// A client that gives up while its call is served leaves the server busy
// until the service time ends: the next call starts no earlier.
func TestAbandonedCallFreesItsServerAtTheEndOfItsService(t *testing.T) {
	// Long enough that the first call is still served when its client
	// leaves, on a loaded machine too.
	const service = 500 * time.Millisecond
	s := start(t, simengine.Options{Servers: 1, Queue: 1, ServiceTime: service})
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan answer, 1)
	go func() { first <- post(ctx, s, "a") }()
	await(t, s, func(st simengine.Stats) bool { return st.Busy == 1 })
	cancel()
	<-first
	await(t, s, func(st simengine.Stats) bool { return st.Abandoned == 1 })

	b := post(t.Context(), s, "b")
	require.NoError(t, b.err)
	assert.Equal(t, http.StatusOK, b.status)
	ca, cb := s.Calls("a"), s.Calls("b")
	require.Len(t, ca, 1)
	require.Len(t, cb, 1)
	assert.Equal(t, simengine.Abandoned, ca[0].Outcome)
	assert.GreaterOrEqual(t, cb[0].At.Add(cb[0].Wait), ca[0].At.Add(service), "b started once a's service was over")
	st := s.Stats()
	assert.EqualValues(t, 1, st.Billed)
	assert.Zero(t, st.Busy)
}

// Closing the server ends the calls inside at once: none is billed, none is
// answered 200.
func TestCloseEndsCallsInside(t *testing.T) {
	e, err := simengine.New(simengine.Options{Servers: 1, Queue: 2, ServiceTime: time.Hour})
	require.NoError(t, err)
	s := simengine.NewServer(e)
	answers := make(chan answer, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { answers <- post(t.Context(), s, fmt.Sprintf("k%d", i)) })
	}
	await(t, s, func(st simengine.Stats) bool { return st.InSystem == 3 })
	s.Close()
	s.Close() // again: nothing
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.err == nil {
			assert.Equal(t, http.StatusServiceUnavailable, a.status, a.key)
		}
	}
	st := e.Stats()
	assert.EqualValues(t, 2, st.Left)
	assert.EqualValues(t, 1, st.Abandoned)
	assert.Zero(t, st.Served)
}

// The knobs change a running engine.
func TestKnobs(t *testing.T) {
	s := start(t, simengine.Options{Servers: 1, Queue: 5, ServiceTime: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range 4 {
		wg.Go(func() { post(ctx, s, fmt.Sprintf("k%d", i)) })
	}
	await(t, s, func(st simengine.Stats) bool { return st.Busy == 1 && st.Queued == 3 })

	require.NoError(t, s.SetServers(3))
	st := s.Stats()
	assert.Equal(t, 3, st.Busy, "raising the servers starts queued calls at once")
	assert.Equal(t, 1, st.Queued)
	assert.InDelta(t, 3/3600.0, s.Capacity(), 1e-12)

	require.NoError(t, s.SetQueue(1))
	a := post(t.Context(), s, "over")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "the queue is full at its new bound")

	require.NoError(t, s.SetShedding(simengine.Shedding{TooManyShare: 1, RetryAfterShare: 1, RetryAfter: 5 * time.Second}))
	a = post(t.Context(), s, "over")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusTooManyRequests, a.status)
	assert.Equal(t, "5", a.header.Get("Retry-After"))

	require.NoError(t, s.SetServers(0))
	assert.Equal(t, 4, s.Stats().Busy, "unlimited servers start every queued call")
	assert.True(t, math.IsInf(s.Capacity(), 1))

	require.NoError(t, s.SetServiceTime(0, 0))
	s.SetAnswer(func(string, int) (int, http.Header) { return http.StatusAccepted, nil })
	s.SetDelay(func(string, int) time.Duration { return 0 })
	a = post(t.Context(), s, "later")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusAccepted, a.status)

	s.SetRefuse(func(string, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	a = post(t.Context(), s, "refused")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status)
	s.SetRefuse(nil)
	a = post(t.Context(), s, "refused")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusAccepted, a.status, "nil refuses nothing")
	assert.Equal(t, []simengine.Outcome{simengine.Rejected, simengine.Billed}, outcomes(s.Calls("refused")))
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *simengine.Options)
		want   string // "" for valid
	}{
		{"zero", func(*simengine.Options) {}, ""},
		{"a capacity", func(o *simengine.Options) {
			o.Servers, o.ServiceTime, o.Jitter, o.Queue = 8, 6*time.Millisecond, 0.5, 16
			o.Shedding = simengine.Shedding{TooManyShare: 0.1, RetryAfterShare: 0.2, RetryAfter: time.Second}
		}, ""},
		{"negative servers", func(o *simengine.Options) { o.Servers = -1 }, "Servers -1"},
		{"negative queue", func(o *simengine.Options) { o.Queue = -1 }, "Queue -1"},
		{"negative service time", func(o *simengine.Options) { o.ServiceTime = -time.Second }, "ServiceTime -1s"},
		{"jitter over 1", func(o *simengine.Options) { o.Jitter = 1.5 }, "Jitter 1.5"},
		{"NaN share", func(o *simengine.Options) { o.Shedding.TooManyShare = math.NaN() }, "Shedding.TooManyShare NaN"},
		{"negative share", func(o *simengine.Options) { o.Shedding.RetryAfterShare = -0.1 }, "Shedding.RetryAfterShare -0.1"},
		{"negative retry-after", func(o *simengine.Options) { o.Shedding.RetryAfter = -time.Second }, "Shedding.RetryAfter -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o simengine.Options
			tt.change(&o)
			e, err := simengine.New(o)
			if tt.want == "" {
				require.NoError(t, err)
				require.NotNil(t, e)
				return
			}
			require.ErrorIs(t, err, simengine.ErrInvalid)
			assert.ErrorContains(t, err, tt.want)
			assert.Nil(t, e)
		})
	}

	t.Run("every field at fault is named", func(t *testing.T) {
		_, err := simengine.New(simengine.Options{Servers: -1, Queue: -2})
		assert.ErrorContains(t, err, "Servers -1")
		assert.ErrorContains(t, err, "Queue -2")
	})

	t.Run("setters", func(t *testing.T) {
		e, err := simengine.New(simengine.Options{Servers: 2})
		require.NoError(t, err)
		assert.ErrorIs(t, e.SetServers(-1), simengine.ErrInvalid)
		assert.ErrorIs(t, e.SetQueue(-1), simengine.ErrInvalid)
		assert.ErrorIs(t, e.SetServiceTime(-1, 0), simengine.ErrInvalid)
		assert.ErrorIs(t, e.SetServiceTime(time.Second, 2), simengine.ErrInvalid)
		assert.ErrorIs(t, e.SetShedding(simengine.Shedding{TooManyShare: 2}), simengine.ErrInvalid)
		assert.True(t, math.IsInf(e.Capacity(), 1), "a rejected value changes nothing")
	})
}

func TestQuantile(t *testing.T) {
	ms := time.Millisecond
	l := simengine.Latencies{1 * ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 6 * ms, 7 * ms, 8 * ms, 9 * ms, 10 * ms}
	tests := []struct {
		give simengine.Latencies
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{l, 0, 1 * ms},
		{l, 0.1, 1 * ms},
		{l, 0.11, 2 * ms},
		{l, 0.5, 5 * ms},
		{l, 0.99, 10 * ms},
		{l, 1, 10 * ms},
		{l, 2, 10 * ms},
		{l, math.NaN(), 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.give.Quantile(tt.q), "q %v of %d", tt.q, len(tt.give))
	}
}

// Keep limits the ledger; the totals still count every call, and Answer
// gets n = 0 for a key not kept.
func TestKeep(t *testing.T) {
	var mu sync.Mutex
	ns := map[string][]int{}
	s := start(t, simengine.Options{
		Keep: func(key string) bool { return strings.HasPrefix(key, "kept") },
		Answer: func(key string, n int) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			ns[key] = append(ns[key], n)
			return http.StatusOK, nil
		},
	})
	for _, key := range []string{"kept-1", "kept-1", "other", "other"} {
		require.Equal(t, http.StatusOK, post(t.Context(), s, key).status)
	}
	assert.Equal(t, map[string][]int{"kept-1": {1, 2}, "other": {0, 0}}, ns)
	assert.Len(t, s.Ledger(), 1)
	assert.Nil(t, s.Calls("other"))
	st := s.Stats()
	assert.EqualValues(t, 4, st.Calls)
	assert.EqualValues(t, 4, st.Served)
	assert.EqualValues(t, 1, st.Billed)
	assert.EqualValues(t, 1, st.Duplicates)
}

func TestAwaitEndsWithItsContext(t *testing.T) {
	s := start(t, simengine.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Await(ctx, func(st simengine.Stats) bool { return st.Calls == 1 })
	assert.ErrorIs(t, err, context.Canceled)
}

// Many clients against a small engine: whatever the interleaving, every call
// ends one way, the system never holds more than servers + queue, and no key
// is billed twice.
func TestInvariantsUnderLoad(t *testing.T) {
	const (
		servers, queue  = 2, 3
		workers, perKey = 8, 60
	)
	s := start(t, simengine.Options{
		Servers: servers, Queue: queue, ServiceTime: time.Millisecond, Jitter: 0.5,
		Shedding: simengine.Shedding{TooManyShare: 0.5, RetryAfterShare: 0.5},
		Answer: func(key string, n int) (int, http.Header) {
			if n%3 == 1 {
				return http.StatusServiceUnavailable, nil
			}
			return http.StatusOK, nil
		},
		Refuse: func(key string, n int) (int, http.Header) {
			if n%5 == 2 {
				return http.StatusTooManyRequests, nil
			}
			return 0, nil
		},
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perKey {
				key := fmt.Sprintf("w%d-%d", w, i)
				if i%2 == 0 {
					key = fmt.Sprintf("shared-%d", i) // posted by every worker
				}
				a := post(t.Context(), s, key)
				assert.NoError(t, a.err)
			}
		})
	}
	wg.Wait()

	st := s.Stats()
	assert.EqualValues(t, workers*perKey, st.Calls)
	assert.Equal(t, st.Calls, st.Served+st.Shed+st.Rejected+st.Left+st.Abandoned, "every call ends one way")
	assert.Positive(t, st.Rejected)
	assert.Equal(t, st.Served, st.Billed+st.Duplicates+st.Refused)
	assert.Equal(t, st.Shed, st.ShedUnavailable+st.ShedTooMany)
	assert.LessOrEqual(t, st.MaxInSystem, servers+queue)
	assert.Zero(t, st.InSystem)
	assert.Zero(t, st.Busy)
	assert.Len(t, s.Latencies(), int(st.Served))

	var billed, dups int64
	for key, calls := range s.Ledger() {
		n := map[simengine.Outcome]int{}
		for _, c := range calls {
			n[c.Outcome]++
		}
		assert.LessOrEqual(t, n[simengine.Billed], 1, "%s billed once at most", key)
		if n[simengine.Duplicate] > 0 {
			assert.Equal(t, 1, n[simengine.Billed], "%s: a duplicate of a bill", key)
		}
		billed += int64(n[simengine.Billed])
		dups += int64(n[simengine.Duplicate])
	}
	assert.Equal(t, st.Billed, billed)
	assert.Equal(t, st.Duplicates, dups)
	sum := 0
	for _, n := range s.Arrivals() {
		sum += n
	}
	assert.Equal(t, workers*perKey, sum, "every call arrived in some window")
	assert.LessOrEqual(t, s.PeakArrivals(), workers*perKey)
	t.Logf("%+v; p50 %v p99 %v; peak %d calls in 100ms", st, s.Latencies().Quantile(0.5), s.Latencies().Quantile(0.99), s.PeakArrivals())
}
