package stream_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/clock"
)

// TestSettledReadAge: a read's age when settled for good is observed from
// its stream timestamp, on the server's clock (the one that stamped it), by
// outcome: acked reads (billed) under ack, dead-lettered ones under term;
// NAKs are not settled for good and are not observed. This machine's wall
// clock is 10 minutes ahead: on it every age would land in (600s, 900s];
// on the server's they are under 5s.
func TestSettledReadAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		if strings.HasPrefix(key, "BAD") {
			return http.StatusUnprocessableEntity, nil
		}
		if strings.HasPrefix(key, "FLAKY") && n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	clk := clock.NewStepping()
	clk.Step(10 * time.Minute)
	o := e.options(1)
	o.Clock = clk
	e.start(o)
	for i := range 3 {
		e.publish("meter.reads.north", read("MTR-1", i), nil)
	}
	e.publish("meter.reads.north", read("FLAKY", 0), nil)
	e.publish("meter.reads.north", read("BAD", 0), nil)
	e.settled(10 * time.Second)

	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	type got struct {
		count, le5, le900 uint64
	}
	byOutcome := map[string]got{}
	for _, mf := range mfs {
		if mf.GetName() != "meter_consumer_settled_read_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h, g := m.GetHistogram(), got{count: m.GetHistogram().GetSampleCount()}
			for _, b := range h.GetBucket() {
				switch b.GetUpperBound() {
				case 5:
					g.le5 = b.GetCumulativeCount()
				case 900:
					g.le900 = b.GetCumulativeCount()
				}
			}
			byOutcome[m.GetLabel()[0].GetValue()] = g
		}
	}
	assert.Equal(t, map[string]got{"ack": {count: 4, le5: 4, le900: 4}, "term": {count: 1, le5: 1, le900: 1}}, byOutcome)
}
