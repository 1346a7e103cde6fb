package stream_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/retry"
)

// TestAReadsAgeIsTimedOnTheServersClock: max_read_age compares the
// server's stream timestamp with now. Taken from this machine's wall
// clock, ten minutes ahead of the server's, a fresh read failing once was
// dead-lettered as expired; ten minutes behind, a read past its age spent
// every attempt and was dead-lettered as exhausted. Timed on the server's
// clock (measured from the consumer info), neither.
func TestAReadsAgeIsTimedOnTheServersClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		skew       time.Duration // this machine's wall clock minus the server's
		maxAge     time.Duration
		alwaysFail bool
		wantReason string // "" : delivered
	}{
		{"local clock ahead, a fresh read failing once", 10 * time.Minute, 5 * time.Minute, false, ""},
		{"local clock behind, a read failing past its age", -10 * time.Minute, 1500 * time.Millisecond, true, "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(n int, _ string) (int, http.Header) {
				if n == 1 || tt.alwaysFail {
					return http.StatusServiceUnavailable, http.Header{"Retry-After": []string{"1"}}
				}
				return http.StatusOK, nil
			})
			clk := clock.NewStepping()
			clk.Step(tt.skew)
			o := e.options(47)
			o.Clock, o.MaxReadAge = clk, tt.maxAge
			e.start(o)
			e.publish("meter.reads.north", read("MTR-1", 1), nil)
			e.settled(10 * time.Second)
			offset := gaugeValue(t, e, "meter_consumer_server_clock_offset_seconds")
			assert.InDelta(t, tt.skew.Seconds(), offset, 1, "the measured offset")
			for _, reason := range []string{"expired", "exhausted"} {
				want := 0.0
				if reason == tt.wantReason {
					want = 1
				}
				assert.Equal(t, want, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", reason)), reason)
			}
			if tt.wantReason == "" {
				calls := e.re.Calls("MTR-1@2026-11-30T06:01:00Z")
				require.NotEmpty(t, calls)
				assert.Equal(t, http.StatusOK, calls[len(calls)-1].Status)
			}
		})
	}
}

// gaugeValue is the value of the gauge name (without labels), negative or not.
func gaugeValue(t *testing.T, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestACopyIsLookedForOnTheServersClock: past the duplicate window, a copy
// whose answer was lost is looked for by the time it was decided, among
// copies the server stamped. Decided on this machine's wall clock, ten
// minutes ahead of the server's, the look-up started ten minutes after
// the copy, missed it, and a second copy was stored.
func TestACopyIsLookedForOnTheServersClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		skew time.Duration
	}{
		{"local clock ahead", 10 * time.Minute},
		{"local clock behind", -10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
			cfg := e.topo.DLQStreamConfig()
			cfg.Duplicates = 200 * time.Millisecond
			_, err := e.js.UpdateStream(t.Context(), cfg)
			require.NoError(t, err)
			clk := clock.NewStepping()
			clk.Step(tt.skew)
			o := e.options(64)
			o.Clock = clk
			o.Policy.Base, o.Policy.Cap = time.Second, time.Second // the copy is tried again past the window
			o.DeadLetterWindow = cfg.Duplicates
			o.DeadLetterRetry = retry.Policy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 1}
			var first atomic.Bool
			o.DeadLetter = lostAck{o.DeadLetter, &first}
			e.start(o)
			e.publish("meter.reads.north", read("MTR-1", 1), nil)
			e.settled(15 * time.Second)

			assert.Len(t, e.deadLetters(), 1, "one copy, though the first answer was lost")
			assert.Len(t, e.re.Calls(key1), 1, "the downstream was asked once")
		})
	}
}
