package dlq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

// BenchmarkBuild builds the dead-letter copy of a read that failed with a
// 422 and carried three headers, one of them dropped and one moved.
func BenchmarkBuild(b *testing.B) {
	e := dlq.Entry{
		Reason: dlq.ReasonPermanent, Cause: classify.CauseHTTP422,
		Err:    errors.New("downstream answered 422 Unprocessable Entity: quantity scale exceeds the tariff's"),
		Stream: "METER_READS", Consumer: "meter-consumer", Subject: "meter.reads.north",
		Sequence: 1234567, Deliveries: 1, PublishedAt: time.Date(2026, 11, 30, 7, 0, 1, 0, time.UTC),
		Header: nats.Header{
			nats.MsgIdHdr:          []string{"head-end-7:000042"},
			"Nats-Expected-Stream": []string{"METER_READS"},
			"Head-End":             []string{"north-substation-07"},
		},
		Data: []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh"}`),
	}
	now := time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if m := dlq.Build("meter.dlq", e, now); m.Subject == "" {
			b.Fatal("no subject")
		}
	}
}
