package stream_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// ledger asserts every published key reached the downstream with a 2xx at
// least once and nothing was dead-lettered.
func (e *env) ledgerDelivered(keys []string, ok func(simengine.Call) bool) {
	e.t.Helper()
	for _, k := range keys {
		calls := e.re.Calls(k)
		delivered := false
		for _, c := range calls {
			delivered = delivered || ok(c)
		}
		assert.True(e.t, delivered, "read %s was never delivered", k)
	}
	assert.Empty(e.t, e.deadLetters())
}

func TestShutdownWithReadsInFlightLosesNone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		latency  time.Duration
		shutdown time.Duration
	}{
		{"in-flight reads finish", 200 * time.Millisecond, 5 * time.Second},
		{"past the deadline reads go back", 2 * time.Second, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.re.setLatency(tt.latency)
			o := e.options(21)
			o.ShutdownTimeout = tt.shutdown
			o.HandlerTimeout = 3 * time.Second
			stop := e.start(o)

			var keys []string
			for i := range 30 {
				e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
				keys = append(keys, fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i))
			}
			require.Eventually(t, func() bool { return e.re.total() >= 8 }, 10*time.Second, time.Millisecond)
			began := time.Now()
			stop()
			assert.Less(t, time.Since(began), tt.shutdown+2*time.Second, "shutdown is bounded")

			e.re.setLatency(0)
			e.start(e.options(22))
			e.settled(15 * time.Second)
			e.ledgerDelivered(keys, func(c simengine.Call) bool { return c.Status == http.StatusOK })
		})
	}
}
