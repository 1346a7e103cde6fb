package demo_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/demo"
	"github.com/meterline/meter-consumer/internal/simengine"
)

const readBody = `{"meter_id":"MTR-00042","read_at":"2026-11-30T07:00:00+01:00","quantity":"1234.567","unit":"kWh"}`

// post builds a valid request for key.
func post(ctx context.Context, key string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, demo.ReadsPath, strings.NewReader(readBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return req
}

func serve(re *demo.RateEngine, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	re.ServeHTTP(rec, req)
	return rec
}

func newEngine(t *testing.T, o demo.RateEngineOptions) *demo.RateEngine {
	t.Helper()
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(5, 6))
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.ServiceTime == 0 {
		o.ServiceTime = time.Microsecond
	}
	re, err := demo.NewRateEngine(o)
	require.NoError(t, err)
	return re
}

func TestRateEngineOutcomeDistribution(t *testing.T) {
	const n = 2000
	re, err := demo.NewRateEngine(demo.RateEngineOptions{
		Rand:        rand.New(rand.NewPCG(2026, 11)),
		SlowDelay:   time.Millisecond,
		ServiceTime: time.Microsecond,
	})
	require.NoError(t, err)

	codes := map[int]int{}
	for i := range n {
		rec := serve(re, post(t.Context(), fmt.Sprintf("key-%d", i)))
		codes[rec.Code]++
		switch rec.Code {
		case http.StatusTooManyRequests:
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
		case http.StatusUnprocessableEntity:
			require.JSONEq(t, `{"error":"unprocessable entity"}`, rec.Body.String())
		}
	}

	st := re.Stats()
	pct := func(v int64) float64 { return 100 * float64(v) / n }
	tests := []struct {
		name string
		got  int64
		want float64
	}{
		{"ok (not slow)", st.Billed - st.Slow, demo.DefaultOKPercent},
		{"unavailable", st.Unavailable, demo.DefaultUnavailablePercent},
		{"rate limited", st.RateLimited, demo.DefaultRateLimitedPercent},
		{"slow", st.Slow, demo.DefaultSlowPercent},
		{"unprocessable", st.Unprocessable, demo.DefaultUnprocessablePercent},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, pct(tt.got), 3, tt.name)
	}
	assert.EqualValues(t, st.Billed, codes[http.StatusOK])
	assert.EqualValues(t, st.Unavailable, codes[http.StatusServiceUnavailable])
	assert.EqualValues(t, st.RateLimited, codes[http.StatusTooManyRequests])
	assert.EqualValues(t, st.Unprocessable, codes[http.StatusUnprocessableEntity])
	assert.Zero(t, st.Duplicates)
	assert.Zero(t, st.BadRequests)
}

func TestRateEngineIdempotentReplay(t *testing.T) {
	tests := []struct {
		name string
		opts demo.RateEngineOptions
	}{
		{"ok", demo.RateEngineOptions{OKPercent: 100}},
		{"slow", demo.RateEngineOptions{SlowPercent: 100, SlowDelay: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := newEngine(t, tt.opts)
			first := serve(re, post(t.Context(), "k1"))
			require.Equal(t, http.StatusOK, first.Code)
			require.JSONEq(t, `{"status":"billed"}`, first.Body.String())
			for range 3 {
				again := serve(re, post(t.Context(), "k1"))
				require.Equal(t, http.StatusOK, again.Code)
				require.JSONEq(t, `{"status":"duplicate"}`, again.Body.String())
			}
			st := re.Stats()
			assert.EqualValues(t, 1, st.Billed)
			assert.EqualValues(t, 3, st.Duplicates)
		})
	}
}

func TestRateEngineRetriesAfterFailureBillOnce(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{OKPercent: 50, UnavailablePercent: 50})
	var ok int
	for range 50 {
		if serve(re, post(t.Context(), "same")).Code == http.StatusOK {
			ok++
		}
	}
	st := re.Stats()
	assert.EqualValues(t, 1, st.Billed)
	assert.EqualValues(t, ok-1, st.Duplicates)
	assert.EqualValues(t, 50-ok, st.Unavailable)
}

func TestRateEngineBadRequests(t *testing.T) {
	tests := []struct {
		name   string
		method string
		ctype  string
		key    string
		body   string
		want   string
	}{
		{"GET", http.MethodGet, "application/json", "k", readBody, "method GET"},
		{"PUT", http.MethodPut, "application/json", "k", readBody, "method PUT"},
		{"no content type", http.MethodPost, "", "k", readBody, "Content-Type"},
		{"text content type", http.MethodPost, "text/plain", "k", readBody, "Content-Type"},
		{"malformed content type", http.MethodPost, "application/json; =", "k", readBody, "Content-Type"},
		{"missing key", http.MethodPost, "application/json", "", readBody, "Idempotency-Key"},
		{"blank key", http.MethodPost, "application/json", "   ", readBody, "Idempotency-Key"},
		{"not JSON", http.MethodPost, "application/json", "k", `{"meter_id":`, "not JSON"},
		{"empty body", http.MethodPost, "application/json", "k", "", "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := newEngine(t, demo.RateEngineOptions{OKPercent: 100})
			req := httptest.NewRequestWithContext(t.Context(), tt.method, demo.ReadsPath, strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}
			rec := serve(re, req)
			require.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.want)
			st := re.Stats()
			assert.EqualValues(t, 1, st.BadRequests)
			assert.Zero(t, st.Billed)
		})
	}

	t.Run("charset parameter is accepted", func(t *testing.T) {
		re := newEngine(t, demo.RateEngineOptions{OKPercent: 100})
		req := post(t.Context(), "k")
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		assert.Equal(t, http.StatusOK, serve(re, req).Code)
	})
}

func TestRateEngineSlowHonoursCancellation(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{SlowPercent: 100, SlowDelay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- serve(re, post(ctx, "k")) }()

	require.Eventually(t, func() bool { return re.Stats().Slow == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	var rec *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		select {
		case rec = <-done:
			return true
		default:
			return false
		}
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Zero(t, re.Stats().Billed, "a cancelled slow request bills nothing")
}

func TestRateEngineConcurrentRequests(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{SlowDelay: time.Millisecond})
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				// Half the keys are shared between workers.
				key := fmt.Sprintf("w%d-%d", w, i)
				if i%2 == 0 {
					key = fmt.Sprintf("shared-%d", i)
				}
				serve(re, post(t.Context(), key))
			}
		})
	}
	wg.Wait()
	st := re.Stats()
	total := st.Billed + st.Duplicates + st.Unavailable + st.RateLimited + st.Unprocessable
	assert.EqualValues(t, workers*each, total)
	assert.LessOrEqual(t, st.Billed, int64(workers*each/2+each/2), "each key is billed at most once")
}

func TestNewRateEngineValidation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	tests := []struct {
		name string
		opts demo.RateEngineOptions
		want string // "" for valid
	}{
		{"defaults", demo.RateEngineOptions{Rand: r}, ""},
		{"all OK", demo.RateEngineOptions{Rand: r, OKPercent: 100}, ""},
		{"custom mix", demo.RateEngineOptions{Rand: r, OKPercent: 50, UnavailablePercent: 20, RateLimitedPercent: 10, SlowPercent: 10, UnprocessablePercent: 10}, ""},
		{"nil rand", demo.RateEngineOptions{}, "Rand is nil"},
		{"under 100", demo.RateEngineOptions{Rand: r, OKPercent: 90}, "add up to 90"},
		{"over 100", demo.RateEngineOptions{Rand: r, OKPercent: 90, SlowPercent: 20}, "add up to 110"},
		{"negative", demo.RateEngineOptions{Rand: r, OKPercent: 110, UnavailablePercent: -10}, "UnavailablePercent -10"},
		{"negative slow delay", demo.RateEngineOptions{Rand: r, OKPercent: 100, SlowDelay: -time.Second}, "SlowDelay"},
		{"header injection", demo.RateEngineOptions{Rand: r, OKPercent: 100, RetryAfter: "1\r\nX: y"}, "RetryAfter"},
		{"a capacity", demo.RateEngineOptions{Rand: r, Servers: 2, ServiceTime: time.Millisecond, Queue: 3}, ""},
		{"negative servers", demo.RateEngineOptions{Rand: r, Servers: -1}, "Servers -1"},
		{"negative queue", demo.RateEngineOptions{Rand: r, Queue: -1}, "Queue -1"},
		{"negative service time", demo.RateEngineOptions{Rand: r, ServiceTime: -time.Second}, "ServiceTime -1s"},
		{"shedding share", demo.RateEngineOptions{Rand: r, Shedding: simengine.Shedding{TooManyShare: 2}}, "TooManyShare 2"},
		{"an overload capacity", demo.RateEngineOptions{Rand: r, Overload: demo.Capacity{Servers: 2, ServiceTime: time.Second, Queue: 1}}, ""},
		{"negative overload servers", demo.RateEngineOptions{Rand: r, Overload: demo.Capacity{Servers: -1}}, "Overload.Servers -1"},
		{"negative overload service time", demo.RateEngineOptions{Rand: r, Overload: demo.Capacity{ServiceTime: -time.Second}}, "Overload.ServiceTime -1s"},
		{"negative overload queue", demo.RateEngineOptions{Rand: r, Overload: demo.Capacity{Queue: -1}}, "Overload.Queue -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re, err := demo.NewRateEngine(tt.opts)
			if tt.want == "" {
				require.NoError(t, err)
				require.NotNil(t, re)
				return
			}
			require.ErrorIs(t, err, demo.ErrConfig)
			assert.ErrorContains(t, err, tt.want)
			assert.Nil(t, re)
		})
	}
}

func TestRateEngineRetryAfterOption(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{RateLimitedPercent: 100, RetryAfter: "7"})
	rec := serve(re, post(t.Context(), "k"))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "7", rec.Header().Get("Retry-After"))
}

// By default the engine serves 200 reads a second: ten times the head-end's
// rate, and less than a backlog drained at full concurrency asks for.
func TestRateEngineDefaultCapacity(t *testing.T) {
	re, err := demo.NewRateEngine(demo.RateEngineOptions{Rand: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, err)
	assert.InDelta(t, 200.0, re.Engine().Capacity(), 1e-9)
}

// Past its capacity the engine sheds a call at once, before any outcome is
// drawn for it: 503, or 429 for a share, some with Retry-After.
func TestRateEngineShedsPastItsCapacity(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{
		OKPercent: 100, Servers: 1, Queue: 1, ServiceTime: time.Hour,
		Shedding: simengine.Shedding{TooManyShare: 1, RetryAfterShare: 1, RetryAfter: 3 * time.Second},
	})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { serve(re, post(ctx, fmt.Sprintf("held-%d", i))) })
	}
	actx, acancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer acancel()
	require.NoError(t, re.Engine().Await(actx, func(st simengine.Stats) bool { return st.InSystem == 2 }))

	rec := serve(re, post(t.Context(), "over"))
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "3", rec.Header().Get("Retry-After"))
	cancel()
	wg.Wait()
	st := re.Stats()
	assert.EqualValues(t, 1, st.Shed)
	assert.EqualValues(t, 1, st.RateLimited)
	assert.Zero(t, st.Billed, "the held calls were given up: nothing billed")
}
