package dlqops_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

func TestStats(t *testing.T) {
	e := newEnv(t, reads()...)
	tests := []struct {
		name string
		f    dlqops.Filter
		want dlqops.Stats
	}{
		{"everything", dlqops.Filter{}, dlqops.Stats{
			Stream: dlqName, Total: 5,
			ByReason: map[string]int{"permanent": 3, "exhausted": 2},
			ByCause:  map[string]int{"http_422": 2, "http_503": 1, "invalid_payload": 1, "timeout": 1},
			ByReasonCause: []dlqops.ReasonCause{
				{Reason: "permanent", Cause: "http_422", Count: 2},
				{Reason: "exhausted", Cause: "http_503", Count: 1},
				{Reason: "exhausted", Cause: "timeout", Count: 1},
				{Reason: "permanent", Cause: "invalid_payload", Count: 1},
			},
			Oldest: base.Add(-3 * time.Hour), Newest: base.Add(-5 * time.Minute),
		}},
		{"meter filter reads payloads", dlqops.Filter{Meter: "MTR-1"}, dlqops.Stats{
			Stream: dlqName, Total: 2,
			ByReason:      map[string]int{"permanent": 1, "exhausted": 1},
			ByCause:       map[string]int{"http_422": 1, "timeout": 1},
			ByReasonCause: []dlqops.ReasonCause{{Reason: "exhausted", Cause: "timeout", Count: 1}, {Reason: "permanent", Cause: "http_422", Count: 1}},
			Oldest:        base.Add(-3 * time.Hour), Newest: base.Add(-30 * time.Minute),
		}},
		{"nothing", dlqops.Filter{Reason: "gone"}, dlqops.Stats{
			Stream: dlqName, ByReason: map[string]int{}, ByCause: map[string]int{}, ByReasonCause: []dlqops.ReasonCause{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.ops.CollectStats(t.Context(), tt.f)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			e.out.Reset()
			require.NoError(t, e.ops.Stats(t.Context(), tt.f, true))
			var j dlqops.Stats
			require.NoError(t, json.Unmarshal(e.out.Bytes(), &j))
			assert.Equal(t, tt.want, j, "--json round-trips")
		})
	}
}

func TestStatsText(t *testing.T) {
	e := newEnv(t, reads()...)
	require.NoError(t, e.ops.Stats(t.Context(), dlqops.Filter{Cause: "http_422"}, false))
	assert.Equal(t, `2 dead-lettered reads in METER_READS_DLQ
oldest 2026-11-30T04:00:00Z (3h0m ago)
newest 2026-11-30T06:55:00Z (5m ago)

REASON     COUNT
permanent  2

CAUSE     COUNT
http_422  2

REASON     CAUSE     COUNT
permanent  http_422  2
`, e.out.String())

	e.out.Reset()
	require.NoError(t, e.ops.Stats(t.Context(), dlqops.Filter{Cause: "nope"}, false))
	assert.Equal(t, "no dead-lettered reads in METER_READS_DLQ match\n", e.out.String())
}

// Reads that missed their age limit are counted under their own reason.
func TestStatsCountExpiredReads(t *testing.T) {
	rs := append(reads(), read{subject: "meter.reads.north", reason: dlq.ReasonExpired, cause: "http_503", seq: 106,
		ago: time.Minute, err: "downstream answered 503", data: payload("MTR-6")})
	e := newEnv(t, rs...)
	s, err := e.ops.CollectStats(t.Context(), dlqops.Filter{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"permanent": 3, "exhausted": 2, "expired": 1}, s.ByReason)
	require.NoError(t, e.ops.Stats(t.Context(), dlqops.Filter{Reason: "expired"}, false))
	assert.Contains(t, e.out.String(), "expired")
}
