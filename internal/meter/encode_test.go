package meter_test

import (
	"testing"

	"github.com/meterline/meter-consumer/internal/meter"
)

func BenchmarkAppendJSON(b *testing.B) {
	r, err := meter.Decode(benchBody)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}
