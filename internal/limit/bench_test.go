package limit_test

import (
	"context"
	"testing"

	"github.com/meterline/meter-consumer/internal/limit"
)

// BenchmarkAcquireRelease is one call's way through a limit that has a slot
// free, on the real clock: what every read delivered pays.
func BenchmarkAcquireRelease(b *testing.B) {
	l, err := limit.New(limit.Options{Max: 32})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tok, err := l.Acquire(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(tok, limit.Answered)
	}
}
