package stream_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/simengine"
)

func TestOutageHoldsReadsInsteadOfDeadLettering(t *testing.T) {
	t.Parallel()
	e, down := newOutageEnv(t, true)
	o := e.options(41)
	o.Breaker = &breaker.Options{Window: time.Second, MinCalls: 5, FailureRatio: 0.5,
		CoolDown: 200 * time.Millisecond, MaxCoolDown: 400 * time.Millisecond, Probes: 1}
	e.start(o)

	// The whole retry budget (40ms+80ms+160ms ceilings) is under 300ms; the
	// outage lasts ten times that, with reads arriving throughout.
	var keys []string
	began := time.Now()
	for i := 0; time.Since(began) < 3*time.Second; i++ {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
		keys = append(keys, fmt.Sprintf("MTR-%d@2026-11-30T06:%02d:00Z", i, i%60))
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, float64(breaker.Open), testutil.ToFloat64(counterGauge(t, e, "meter_consumer_breaker_state")), "open at the end of the outage")
	down.Store(false)
	e.settled(20 * time.Second)

	e.ledgerDelivered(keys, func(c simengine.Call) bool { return c.Status == http.StatusOK })
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_dead_letters_total", "reason", "exhausted")))
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")), 1.0)
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "closed")), 1.0)
	assert.Equal(t, float64(breaker.Closed), testutil.ToFloat64(counterGauge(t, e, "meter_consumer_breaker_state")))
	// The downstream saw a trickle of probes during the outage, not every read on every attempt.
	t.Logf("%d reads, %d downstream calls", len(keys), e.re.total())
}

func TestPermanentFailuresDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(int, string) (int, http.Header) { return http.StatusUnprocessableEntity, nil })
	o := e.options(42)
	o.Breaker = &breaker.Options{Window: time.Second, MinCalls: 3, FailureRatio: 0.5, CoolDown: time.Second, MaxCoolDown: time.Minute, Probes: 1}
	e.start(o)
	for i := range 20 {
		e.publish("meter.reads.north", read(fmt.Sprintf("MTR-%d", i), i), nil)
	}
	e.settled(10 * time.Second)
	assert.Len(t, e.deadLetters(), 20)
	assert.Zero(t, testutil.ToFloat64(counter(t, e, "meter_consumer_breaker_transitions_total", "to", "open")))
}
