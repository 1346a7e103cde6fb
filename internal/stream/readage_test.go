package stream_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettledReadAge: a read's age when settled for good is observed from
// its stream timestamp to the consumer's clock, by outcome: acked reads
// (billed) under ack, dead-lettered ones under term; NAKs are not settled
// for good and are not observed. The clock runs 10 minutes ahead of the
// server's, so every age lands in (600s, 900s].
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
	o := e.options(1)
	o.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
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
		count        uint64
		le600, le900 uint64
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
				case 600:
					g.le600 = b.GetCumulativeCount()
				case 900:
					g.le900 = b.GetCumulativeCount()
				}
			}
			byOutcome[m.GetLabel()[0].GetValue()] = g
		}
	}
	assert.Equal(t, map[string]got{"ack": {count: 4, le600: 0, le900: 4}, "term": {count: 1, le600: 0, le900: 1}}, byOutcome)
}
