//go:build demosoak

// The demo's keep-up measurement: it runs the demo as `consumer --demo`
// does (service.Run with the demo's configuration, in this process) for a
// while, then says whether the consumer kept up with the head-end. It is a
// measurement, not part of the test command (it takes minutes), hence the
// build tag:
//
//	go test -tags demosoak -run TestDemoKeepsUp -v -timeout 0 ./internal/service
//
// DEMO_SOAK_DURATION shortens or lengthens the run (default 5m, e.g. 80s);
// DEMO_SOAK_LOG names a file to write the service's log to (info level);
// DEMO_SOAK_INCIDENTS=1 runs the demo with --demo-incidents.
// Run it without -race: it measures the product, not the race detector.

package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
)

// The target: over the run, the consumer settles at least this share of
// the reads that arrived, and no read waits longer than this unsettled.
const (
	keepUpSettledShare = 0.95
	keepUpOldest       = 10 * time.Second
)

// soakEvery is how often a line of progress is logged.
const soakEvery = 10 * time.Second

func TestDemoKeepsUp(t *testing.T) {
	d := 5 * time.Minute
	if s := os.Getenv("DEMO_SOAK_DURATION"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err, "DEMO_SOAK_DURATION")
	}
	log := slog.New(slog.DiscardHandler)
	if path := os.Getenv("DEMO_SOAK_LOG"); path != "" {
		f, err := os.Create(path)
		require.NoError(t, err)
		defer f.Close()
		log = slog.New(slog.NewTextHandler(f, nil))
	}

	cfg := config.Default()
	cfg.Demo = true
	cfg.DemoIncidents = os.Getenv("DEMO_SOAK_INCIDENTS") == "1"
	cfg.DataDir = t.TempDir()
	cfg.NATS.Listen = natstest.FreeAddr(t)
	cfg.HTTP.Addr = "" // the registry is read here, not scraped
	require.NoError(t, cfg.Validate())

	reg := prometheus.NewRegistry()
	running, stop := context.WithCancel(t.Context())
	defer stop()
	ran := make(chan error, 1)
	started := time.Now()
	go func() { ran <- service.Run(running, cfg, service.Deps{Logger: log, Registry: reg}) }()

	var nc *nats.Conn
	require.Eventually(t, func() bool {
		var err error
		nc, err = nats.Connect("nats://" + cfg.NATS.Listen)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the embedded server starts")
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	src := lag.JetStream{JS: js, Stream: cfg.Stream.Name, Durable: cfg.Consumer.Durable, DLQName: cfg.DLQ.Stream,
		Bucket: service.Topology(cfg).Bucket()}
	require.Eventually(t, func() bool {
		_, err := src.ConsumerInfo(t.Context())
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the service makes its durable")

	// A backlog reader of its own, read on demand: the service's reads
	// every 15s or so.
	lagReg := prometheus.NewRegistry()
	backlog := lag.New(src, lagReg, time.Minute, retry.NewRand(1), nil)

	t.Logf("demo keep-up run of %s", d)
	tick := time.NewTicker(soakEvery)
	defer tick.Stop()
	end := time.NewTimer(time.Until(started.Add(d)))
	defer end.Stop()
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-end.C:
			done = true
		case err := <-ran:
			t.Fatalf("the service stopped early: %v", err)
		}
		s := sample(t, src, backlog, reg, lagReg)
		t.Logf("%4.0fs %s", time.Since(started).Seconds(), s.line())
		if done {
			s.report(t, time.Since(started))
		}
	}
	stop()
	require.NoError(t, <-ran)
}

// soak is one sample of the run.
type soak struct {
	published           uint64  // the stream's last sequence: every read the head-end published
	pending, ackPending uint64  // the durable's
	acked, deadLettered float64 // messages_total{outcome="ack"} and {outcome="term"}
	naks                float64 // messages_total{outcome="nak"}
	oldest              float64 // oldest_unacked_age_seconds, read now
	limit, breaker      float64 // concurrency_limit, breaker_state
}

func sample(t *testing.T, src lag.JetStream, backlog *lag.Reader, reg, lagReg prometheus.Gatherer) soak {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	si, err := src.StreamInfo(ctx)
	require.NoError(t, err)
	ci, err := src.ConsumerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, backlog.Read(ctx))
	return soak{
		published:    si.State.LastSeq,
		pending:      ci.NumPending,
		ackPending:   uint64(ci.NumAckPending),
		acked:        value(t, reg, "meter_consumer_messages_total", "outcome", "ack"),
		deadLettered: value(t, reg, "meter_consumer_messages_total", "outcome", "term"),
		naks:         value(t, reg, "meter_consumer_messages_total", "outcome", "nak"),
		oldest:       value(t, lagReg, "meter_consumer_oldest_unacked_age_seconds", "", ""),
		limit:        value(t, reg, "meter_consumer_concurrency_limit", "", ""),
		breaker:      value(t, reg, "meter_consumer_breaker_state", "", ""),
	}
}

func (s soak) settled() float64 { return s.acked + s.deadLettered }

func (s soak) share() float64 {
	if s.published == 0 {
		return 1
	}
	return s.settled() / float64(s.published)
}

func (s soak) line() string {
	return fmt.Sprintf("published %5d  settled %5.0f (%.2f)  pending %4d  ack pending %4d  oldest unsettled %5.1fs  limit %2.0f  breaker %.0f",
		s.published, s.settled(), s.share(), s.pending, s.ackPending, s.oldest, s.limit, s.breaker)
}

func (s soak) report(t *testing.T, took time.Duration) {
	t.Helper()
	t.Logf("after %s: published %d; settled %.0f (acked %.0f + dead-lettered %.0f; %.0f NAKs on the way), %.3f of what arrived; the durable's pending %d, ack pending %d; oldest unsettled %.1fs; concurrency limit %.0f",
		took.Round(time.Second), s.published, s.settled(), s.acked, s.deadLettered, s.naks, s.share(),
		s.pending, s.ackPending, s.oldest, s.limit)
	assert.GreaterOrEqual(t, s.share(), keepUpSettledShare, "settled / arrived")
	assert.Less(t, s.oldest, keepUpOldest.Seconds(), "the oldest unsettled read's age, in seconds")
}

// value is the value of the metric name, of the series whose label has
// value want (any series when label is ""); 0 when there is none.
func value(t *testing.T, g prometheus.Gatherer, name, label, want string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label, want) {
				switch {
				case m.GetCounter() != nil:
					return m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
