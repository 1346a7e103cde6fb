package downstream_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
)

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
