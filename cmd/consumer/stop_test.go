package main_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/simengine"
	"github.com/meterline/meter-consumer/internal/topology"
)

var heldRe = regexp.MustCompile(`(?m)^meter_consumer_retry_held(?:\{[^}]*\})? (\S+)$`)

// A stop with a full park ends inside service.MaxStop (the figure the
// pod's terminationGracePeriodSeconds is set from), and hands every read
// back to the server before the exit: none is left waiting for its ack wait.
// The rate engine answers 503 to everything, the breaker opens and stays
// open, and the reads pulled are parked until the stop.
func TestAStopWithAFullParkEndsWithinMaxStop(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	e, err := simengine.New(simengine.Options{
		Answer: func(string, int) (int, http.Header) { return http.StatusServiceUnavailable, nil },
	})
	require.NoError(t, err)
	// Slow refusals: the breaker opens on an engine silent for 1s, and by
	// then the two workers have called 20 reads, not the whole batch (with
	// quick ones, under -race on a busy machine, they called most of it and
	// too few were parked).
	require.NoError(t, e.SetServiceTime(100*time.Millisecond, 0))
	engine := simengine.NewServer(e)
	t.Cleanup(engine.Close)

	const shutdown = time.Second
	args := []string{"--nats-url", s.ClientURL(), "--replicas", "1", "--downstream-url", engine.URL + "/reads",
		"--http-addr", "127.0.0.1:0", "--concurrency", "2", "--pull-batch", "64", "--handler-timeout", "800ms",
		"--breaker-min-calls", "2", "--breaker-cool-down", "1h", "--breaker-max-cool-down", "1h",
		"--shutdown-timeout", shutdown.String()}
	cfg, err := config.Load(args, nil)
	require.NoError(t, err)
	_, err = topology.Ensure(t.Context(), js, service.Topology(cfg))
	require.NoError(t, err)
	// The reads are there before the process starts: its first pull takes a
	// whole batch.
	const reads = 200
	for i := range reads {
		_, err := js.Publish(t.Context(), "meter.reads.north", fmt.Appendf(nil,
			`{"meter_id":"MTR-%d","read_at":"2026-11-30T07:00:00Z","quantity":"1.5","unit":"kWh"}`, i))
		require.NoError(t, err)
	}
	p := start(t, args...)
	addr := httpAddr(t, p)
	// The breaker opens, pulling stops, and the batch pulled is parked, but
	// for the reads the two workers hold.
	var held float64
	require.Eventually(t, func() bool {
		if p.Count("breaker open: stopped pulling; in-flight reads are held") == 0 {
			return false
		}
		_, body := get(t, "http://"+addr+"/metrics")
		m := heldRe.FindStringSubmatch(body)
		if m == nil {
			return false
		}
		held, _ = strconv.ParseFloat(m[1], 64)
		return held >= 48
	}, 20*time.Second, 20*time.Millisecond, "the reads are never parked")
	cons, err := js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)

	before, err := cons.Info(t.Context())
	require.NoError(t, err)
	longest := service.MaxStop(shutdown)
	code, took := p.Term(longest + 10*time.Second)
	assert.Equal(t, 0, code)
	assert.Less(t, took, longest, "the stop ends within MaxStop")
	t.Logf("stop with %v parked reads took %s; MaxStop %s", held, took, longest)

	assert.Equal(t, longest.String(), p.First("shutting down; a second signal exits at once")["max_stop"])

	// Every read the process held is back on the server: the test's own
	// pull gets them all again at once, well before the ack wait (30s) would
	// have brought them back.
	redelivered, seen := 0, map[uint64]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < reads && time.Now().Before(deadline) {
		batch, err := cons.Fetch(reads, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			require.NoError(t, err)
			seen[md.Sequence.Stream] = true
			if md.NumDelivered > 1 {
				redelivered++
			}
		}
	}
	assert.Len(t, seen, reads, "every read is delivered again within 10s")
	assert.Equal(t, before.NumAckPending, redelivered, "the reads the process held, handed back")
}
