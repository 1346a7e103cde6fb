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
	"github.com/meterline/meter-consumer/internal/natstest"
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
	h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: time.Second, Concurrency: 4})
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
		{"connection refused", "http://" + natstest.FreeAddr(t), classify.Transient, classify.CauseConnection, 0, nil},
		{"connection reset", "http://" + reset, classify.Transient, classify.CauseConnection, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: tt.url, Timeout: 200 * time.Millisecond})
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
	h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: time.Second, Concurrency: 2})
	require.NoError(t, err)
	for range 50 {
		require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	}
	assert.Equal(t, int64(1), conns.Load(), "sequential posts share one pooled connection")
}

func TestNewHTTPValidates(t *testing.T) {
	for _, u := range []string{"", "ftp://x/y", "/reads", "http://", "ftp://bob:pa55word@x/y", "http://bob:pa55word@x:port/y"} {
		_, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: u, Timeout: time.Second})
		require.Error(t, err, u)
		assert.NotContains(t, err.Error(), "pa55word")
	}
	_, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: "http://x/reads"})
	assert.ErrorContains(t, err, "timeout")
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
	h, _ := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: time.Second})
	r, _ := meter.Decode([]byte(`{"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"0.1","unit":"m3"}`))
	fmt.Println(h.Deliver(context.Background(), r))
	// Output:
	// MTR-9@2026-11-30T07:00:00Z
	// {"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"0.1","unit":"m3","idempotency_key":"MTR-9@2026-11-30T07:00:00Z"}
	// <nil>
}

// A delivery is a 2xx answer to the POST itself. Behind every 3xx sits a
// page that answers 200 to a GET (a login page, the https twin of the URL):
// following the redirect would ack a read that was never billed.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	var posts, gets atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		_, _ = io.WriteString(w, "<html>sign in</html>")
	})
	for _, code := range []int{300, 301, 302, 303, 304, 305, 307, 308} {
		mux.HandleFunc(fmt.Sprintf("/reads/%d", code), func(w http.ResponseWriter, r *http.Request) {
			posts.Add(1)
			w.Header().Set("Location", "/login?session=secret-token")
			w.WriteHeader(code)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, client := range []*http.Client{nil, {}} {
		for _, code := range []int{300, 301, 302, 303, 304, 305, 307, 308} {
			t.Run(fmt.Sprintf("%d custom-client=%v", code, client != nil), func(t *testing.T) {
				h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: fmt.Sprintf("%s/reads/%d", srv.URL, code), Timeout: time.Second, Client: client})
				require.NoError(t, err)
				err = h.Deliver(t.Context(), mustRead(t))
				var ce *classify.Error
				require.ErrorAs(t, err, &ce, "a %d is not a delivery", code)
				assert.Equal(t, classify.Transient, ce.Class)
				assert.Equal(t, classify.CauseRedirect, ce.Cause)
				assert.Contains(t, err.Error(), "/login", "the error says where it pointed")
				assert.NotContains(t, err.Error(), "secret-token", "the query of a Location may carry a token")
			})
		}
	}
	assert.Equal(t, int64(16), posts.Load())
	assert.Zero(t, gets.Load(), "no redirect was followed")
}

// BenchmarkDeliver posts one read to a loopback server that answers 200
// with no body, through the built-in transport: its allocations per read
// are the sink's and net/http's (the server's are in the same process, and
// in ns/op too, with the loopback's cost).
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL + "/reads", Timeout: 5 * time.Second, Concurrency: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer h.CloseIdle()
	r, err := meter.Decode([]byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","head_end":"north-substation-07"}`))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Deliver(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
