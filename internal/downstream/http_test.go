package downstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
)

func mustRead(t testing.TB) meter.Read {
	t.Helper()
	r, err := meter.Decode([]byte(`{"meter_id":"MTR-1","read_at":"2026-11-30T08:00:00+01:00","quantity":12.500,"unit":"kWh"}`))
	require.NoError(t, err)
	return r
}

func TestDeliverPostsTheNormalisedRead(t *testing.T) {
	var got struct {
		method, ctype, key string
		body               map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.ctype, got.key = r.Method, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key")
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		_ = dec.Decode(&got.body)
	}))
	defer srv.Close()
	h, err := downstream.NewHTTP(downstream.HTTPOptions{URL: srv.URL, Timeout: time.Second, Concurrency: 4})
	require.NoError(t, err)

	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	assert.Equal(t, http.MethodPost, got.method)
	assert.Equal(t, "application/json", got.ctype)
	assert.Equal(t, "MTR-1@2026-11-30T07:00:00Z", got.key)
	assert.Equal(t, map[string]any{"meter_id": "MTR-1", "read_at": "2026-11-30T07:00:00Z",
		"quantity": "12.500", "unit": "kWh", "idempotency_key": "MTR-1@2026-11-30T07:00:00Z"}, got.body)
}

func TestDeliverClassifies(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	status := func(code int, h http.Header) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
		}))
	}
	s422, s503, s429 := status(422, nil), status(503, nil), status(429, http.Header{"Retry-After": {"3"}})
	defer s422.Close()
	defer s503.Close()
	defer s429.Close()
	reset := resetServer(t)

	tests := []struct {
		name       string
		url        string
		wantClass  classify.Class
		wantCause  classify.Cause
		wantWait   time.Duration
		cancelFrom context.Context
	}{
		{"422 permanent", s422.URL, classify.Permanent, classify.CauseHTTP422, 0, nil},
		{"503 transient", s503.URL, classify.Transient, classify.CauseHTTP503, 0, nil},
		{"429 with Retry-After", s429.URL, classify.Transient, classify.CauseRateLimited, 3 * time.Second, nil},
		{"timeout", slow.URL, classify.Transient, classify.CauseTimeout, 0, nil},
		{"connection refused", "http://" + closedAddr(t), classify.Transient, classify.CauseConnection, 0, nil},
		{"connection reset", "http://" + reset, classify.Transient, classify.CauseConnection, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := downstream.NewHTTP(downstream.HTTPOptions{URL: tt.url, Timeout: 200 * time.Millisecond})
			require.NoError(t, err)
			err = h.Deliver(t.Context(), mustRead(t))
			var ce *classify.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.wantClass, ce.Class, err.Error())
			assert.Equal(t, tt.wantCause, ce.Cause, err.Error())
			assert.Equal(t, tt.wantWait, ce.RetryAfter)
		})
	}
}

func TestConnectionsAreReused(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	h, err := downstream.NewHTTP(downstream.HTTPOptions{URL: srv.URL, Timeout: time.Second, Concurrency: 2})
	require.NoError(t, err)
	for range 50 {
		require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	}
	assert.Equal(t, int64(1), conns.Load(), "sequential posts share one pooled connection")
}

func TestNewHTTPValidates(t *testing.T) {
	for _, u := range []string{"", "ftp://x/y", "/reads", "http://"} {
		_, err := downstream.NewHTTP(downstream.HTTPOptions{URL: u, Timeout: time.Second})
		assert.Error(t, err, u)
	}
	_, err := downstream.NewHTTP(downstream.HTTPOptions{URL: "http://x/reads"})
	assert.ErrorContains(t, err, "timeout")
}

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// resetServer accepts connections and resets them at once.
func resetServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.ReadAtLeast(c, make([]byte, 16), 1)
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func ExampleHTTP_Deliver() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Println(r.Header.Get("Idempotency-Key"))
		fmt.Println(string(b))
	}))
	defer srv.Close()
	h, _ := downstream.NewHTTP(downstream.HTTPOptions{URL: srv.URL, Timeout: time.Second})
	r, _ := meter.Decode([]byte(`{"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"0.1","unit":"m3"}`))
	fmt.Println(h.Deliver(context.Background(), r))
	// Output:
	// MTR-9@2026-11-30T07:00:00Z
	// {"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"0.1","unit":"m3","idempotency_key":"MTR-9@2026-11-30T07:00:00Z"}
	// <nil>
}
