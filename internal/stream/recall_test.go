package stream_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/retry"
)

// A retry that is due comes back at once, not behind the reads buffered
// for the workers: with two workers, a pull of 32 and calls of 5ms, a
// read's retry due a millisecond after its failed call came 7-30 calls
// later (19 at the median) when it waited for Consume's next pull (the
// recall switched off), and 3-4 calls later when the replica pulls it back
// itself (three runs).
func TestADueRetryIsPulledBackAtOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string // the keys called, in the order answered
	e := newEnv(t, func(n int, key string) (int, http.Header) {
		mu.Lock()
		order = append(order, key)
		mu.Unlock()
		if strings.HasPrefix(key, "FAIL-") && n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	e.re.setLatency(5 * time.Millisecond)
	const reads, failing = 400, 6
	for i := range reads {
		meter := fmt.Sprintf("OK-%d", i)
		if i%50 == 25 && i/50 < failing {
			meter = fmt.Sprintf("FAIL-%d", i)
		}
		e.publish("meter.reads.north", read(meter, i), nil)
	}
	o := e.options(29)
	o.Concurrency, o.PullBatch = 2, 32
	o.Policy = retry.Policy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 4}
	e.start(o)
	e.settled(60 * time.Second)

	mu.Lock()
	defer mu.Unlock()
	var between []int
	for i, k := range order {
		if !strings.HasPrefix(k, "FAIL-") || slices.Index(order, k) != i {
			continue
		}
		if next := slices.Index(order[i+1:], k); next >= 0 {
			between = append(between, next)
		}
	}
	require.Len(t, between, failing, "each failing read called twice")
	slices.Sort(between)
	t.Logf("calls between a failed call and its retry: %v", between)
	assert.LessOrEqual(t, between[failing/2], 10, "the median retry came a few calls later (30-34 without the pull of its own)")
	assert.GreaterOrEqual(t, testutil.ToFloat64(counter(t, e, "meter_consumer_retries_recalled_total")), float64(failing-1),
		"the retries came back with the replica's own pulls")
}
