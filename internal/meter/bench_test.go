package meter_test

import (
	"testing"

	"github.com/meterline/meter-consumer/internal/meter"
)

var benchBody = []byte(`{"meter_id":"MTR-000123456","read_at":"2026-11-30T12:30:00.250+05:30","quantity":"1234.567","unit":"kWh","idempotency_key":"b1946ac9-2a5c-4e0d-8f2b-5c3f6b1c2d3e","firmware":{"version":"4.2.1","flags":[1,2,3]}}`)

func BenchmarkDecode(b *testing.B) {
	tests := []struct {
		name string
		give []byte
	}{
		{name: "given key", give: benchBody},
		{name: "derived key", give: []byte(give("quantity", `1.5e3`))},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tt.give)))
			for b.Loop() {
				if _, err := meter.Decode(tt.give); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

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
