//go:build soak

package reliability_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/proctest"
)

// The long variants: go test -tags soak -run Soak -timeout 60m -v ./internal/reliability/
// SOAK_DURATION (default 10m) and SOAK_RATE (reads per second, default 200)
// tune the soak.

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// rss returns the resident set size of pid in KiB.
func rss(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	return 0
}

// TestSoakSteadyRate runs the consumer at a steady rate with 5% transient
// failures and 1% permanent ones, sampling its memory. The binary is built
// without -race, as it ships: the package's race build sampled 60 MiB at
// its first second (19 MiB without -race) and peaked past the 64 MiB target.
func TestSoakSteadyRate(t *testing.T) {
	t.Parallel()
	duration, rate := envDuration("SOAK_DURATION", 10*time.Minute), envInt("SOAK_RATE", 200)
	bin, err := proctest.Build(t.TempDir(), false)
	require.NoError(t, err)
	s := newScenario(t, setup{binary: bin, policy: func(key string, n int) int {
		h := 0
		for _, c := range key {
			h = h*31 + int(c)
		}
		switch {
		case h%100 == 0:
			return http.StatusUnprocessableEntity
		case h%20 == 1 && n == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}, args: []string{"--log-level", "info"}})
	c := s.consumer
	var mu sync.Mutex
	var samples []int
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				mu.Lock()
				samples = append(samples, rss(c.Pid()))
				mu.Unlock()
			}
		}
	}()
	began := time.Now()
	for i := 0; time.Since(began) < duration; i++ {
		body, key := read("SOAK", i)
		s.publishBody("meter.reads.soak", body, key, nil)
		time.Sleep(time.Second / time.Duration(rate))
	}
	s.settled(5 * time.Minute)
	close(stop)
	permanent := func(k string) bool {
		h := 0
		for _, c := range k {
			h = h*31 + int(c)
		}
		return h%100 == 0
	}
	f := s.checkLedger(permanent, s.countKeys(permanent))
	mu.Lock()
	first, peak, last := samples[0], 0, samples[len(samples)-1]
	for _, v := range samples {
		peak = max(peak, v)
	}
	mu.Unlock()
	t.Logf("SOAK %s at %d/s: RSS first %d KiB, peak %d KiB, last %d KiB", duration, rate, first, peak, last)
	assert.Less(t, peak, 64<<10, "RSS stays under 64 MiB")
	f.log(t, "soak")
}

func (w *world) countKeys(pred func(string) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, k := range w.keys {
		if pred(k) {
			n++
		}
	}
	return n
}

// TestSoakLongOutage is scenario 1 with the default retry policy: an
// outage of ten times the whole retry budget (about 155s).
func TestSoakLongOutage(t *testing.T) {
	t.Parallel()
	policy, heal := outage()
	s := newScenario(t, setup{policy: policy, defaults: true})
	began := time.Now()
	for i := 0; time.Since(began) < envDuration("SOAK_OUTAGE", 155*time.Second); i++ {
		body, key := read("LONG", i)
		s.publishBody("meter.reads.long", body, key, nil)
		time.Sleep(50 * time.Millisecond)
	}
	heal()
	recovered := time.Now()
	s.settled(10 * time.Minute)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(recovered)
	f.log(t, "long-outage")
}
