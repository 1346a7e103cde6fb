package demo

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxBodySize is the largest request body the rate engine reads.
const maxBodySize = 1 << 20

// outcome is the answer drawn for a request not billed before.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeUnavailable
	outcomeRateLimited
	outcomeSlow
	outcomeUnprocessable
)

// RateEngineStats counts what a RateEngine answered.
type RateEngineStats struct {
	Billed        int64 // keys billed (200, including slow ones)
	Duplicates    int64 // 200 for a key already billed
	Unavailable   int64 // 503
	RateLimited   int64 // 429
	Slow          int64 // slow responses started
	Unprocessable int64 // 422
	BadRequests   int64 // 400
}

// RateEngine simulates the billing rate engine. It is an http.Handler and
// is safe for concurrent requests.
type RateEngine struct {
	opts RateEngineOptions

	mu     sync.Mutex // guards opts.Rand, billed and stats
	billed map[string]struct{}
	stats  RateEngineStats
}

// NewRateEngine validates o, fills its defaults and returns the engine. A
// rejected o yields an error wrapping ErrConfig.
func NewRateEngine(o RateEngineOptions) (*RateEngine, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &RateEngine{opts: o, billed: make(map[string]struct{})}, nil
}

// Stats returns a snapshot of the counters.
func (re *RateEngine) Stats() RateEngineStats {
	re.mu.Lock()
	defer re.mu.Unlock()
	return re.stats
}

// ServeHTTP answers one posted read.
func (re *RateEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, reason := re.check(w, r)
	if reason != "" {
		re.mu.Lock()
		re.stats.BadRequests++
		re.mu.Unlock()
		re.log(r, key, http.StatusBadRequest, reason)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": reason})
		return
	}

	re.mu.Lock()
	if _, ok := re.billed[key]; ok {
		re.stats.Duplicates++
		re.mu.Unlock()
		re.log(r, key, http.StatusOK, "duplicate")
		writeJSON(w, http.StatusOK, map[string]string{"status": "duplicate"})
		return
	}
	out := re.draw()
	switch out {
	case outcomeOK:
		re.billed[key] = struct{}{}
		re.stats.Billed++
	case outcomeUnavailable:
		re.stats.Unavailable++
	case outcomeRateLimited:
		re.stats.RateLimited++
	case outcomeSlow:
		re.stats.Slow++
	case outcomeUnprocessable:
		re.stats.Unprocessable++
	}
	re.mu.Unlock()

	switch out {
	case outcomeOK:
		re.log(r, key, http.StatusOK, "billed")
		writeJSON(w, http.StatusOK, map[string]string{"status": "billed"})
	case outcomeUnavailable:
		re.log(r, key, http.StatusServiceUnavailable, "unavailable")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "rate engine unavailable"})
	case outcomeRateLimited:
		re.log(r, key, http.StatusTooManyRequests, "rate limited")
		w.Header().Set("Retry-After", re.opts.RetryAfter)
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "rate limited"})
	case outcomeSlow:
		re.slow(w, r, key)
	case outcomeUnprocessable:
		re.log(r, key, http.StatusUnprocessableEntity, "unprocessable")
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "no tariff for this meter"})
	}
}

// slow waits SlowDelay, then bills the key and answers 200. If the request
// ends first, nothing is billed and the answer is 503 (the client has gone
// or the server is stopping; either way the read must be posted again).
func (re *RateEngine) slow(w http.ResponseWriter, r *http.Request, key string) {
	t := time.NewTimer(re.opts.SlowDelay)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		re.log(r, key, http.StatusServiceUnavailable, "slow request cancelled")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "request cancelled"})
		return
	case <-t.C:
	}

	re.mu.Lock()
	status := "billed"
	if _, ok := re.billed[key]; ok {
		re.stats.Duplicates++
		status = "duplicate"
	} else {
		re.billed[key] = struct{}{}
		re.stats.Billed++
	}
	re.mu.Unlock()
	re.log(r, key, http.StatusOK, "slow, "+status)
	writeJSON(w, http.StatusOK, map[string]string{"status": status})
}

// check returns the request's idempotency key, or the reason it is a bad
// request.
func (re *RateEngine) check(w http.ResponseWriter, r *http.Request) (key, reason string) {
	if r.Method != http.MethodPost {
		return "", "method " + r.Method + " is not POST"
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return "", "Content-Type is not application/json"
	}
	key = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" {
		return "", "Idempotency-Key header is missing"
	}
	body, err := readBody(w, r)
	if err != nil {
		return key, "reading body: " + err.Error()
	}
	if !json.Valid(body) {
		return key, "body is not JSON"
	}
	return key, ""
}

// draw picks the outcome of a request; the caller holds re.mu.
func (re *RateEngine) draw() outcome {
	n := re.opts.Rand.IntN(100)
	for _, c := range []struct {
		percent int
		out     outcome
	}{
		{re.opts.OKPercent, outcomeOK},
		{re.opts.UnavailablePercent, outcomeUnavailable},
		{re.opts.RateLimitedPercent, outcomeRateLimited},
		{re.opts.SlowPercent, outcomeSlow},
	} {
		if n < c.percent {
			return c.out
		}
		n -= c.percent
	}
	return outcomeUnprocessable
}

func (re *RateEngine) log(r *http.Request, key string, status int, what string) {
	re.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "rate engine answered",
		slog.String("idempotency_key", key), slog.Int("status", status), slog.String("outcome", what))
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, errors.New("no body")
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
