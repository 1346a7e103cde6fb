package simengine_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// The engine's own cost per call, with no HTTP: admission, the ledger, the
// answer. Keep reports it with and without the per-key ledger.
func BenchmarkServeHTTP(b *testing.B) {
	for _, bb := range []struct {
		name string
		keep func(string) bool
	}{
		{"ledger", nil},
		{"no-ledger", func(string) bool { return false }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			e, err := simengine.New(simengine.Options{Servers: 64, Queue: 64, Keep: bb.keep})
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodPost, "/reads", nil)
				body := strings.NewReader(readBody)
				w := &discard{header: http.Header{}}
				for pb.Next() {
					body.Reset(readBody)
					req.Body = io.NopCloser(body)
					req.Header[simengine.KeyHeader] = []string{"k" + strconv.FormatInt(next.Add(1), 10)}
					e.ServeHTTP(w, req)
					if w.status != http.StatusOK {
						b.Fatalf("status %d", w.status)
					}
				}
			})
		})
	}
}

// discard is a ResponseWriter that keeps the status only.
type discard struct {
	header http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(status int)      { d.status = status }

// Loopback clients, more than the engine holds, against an engine of 8
// servers of 6ms and a queue of 16 (a capacity of 1333 calls a second):
// what it served a second, its latency, and the share it shed.
func BenchmarkSaturated(b *testing.B) {
	e, err := simengine.New(simengine.Options{
		Servers: 8, ServiceTime: 6 * time.Millisecond, Queue: 16,
		Shedding: simengine.Shedding{RetryAfterShare: 0.2, RetryAfter: time.Second},
		Keep:     func(string) bool { return false },
	})
	if err != nil {
		b.Fatal(err)
	}
	s := simengine.NewServer(e)
	defer s.Close()
	var next atomic.Int64
	b.SetParallelism(32) // 32 x GOMAXPROCS clients
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(context.Background(), s, "k"+strconv.FormatInt(next.Add(1), 10))
		}
	})
	elapsed := time.Since(start)
	st := e.Stats()
	l := e.Latencies()
	b.ReportMetric(float64(st.Served)/elapsed.Seconds(), "served/s")
	b.ReportMetric(float64(st.Shed)/float64(st.Calls), "shed-share")
	b.ReportMetric(float64(l.Quantile(0.5))/1e6, "p50-ms")
	b.ReportMetric(float64(l.Quantile(0.99))/1e6, "p99-ms")
}
