package service_test

import (
	"context"
	"github.com/nats-io/nats-server/v2/server"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// series returns the value of every series of the metric family name that
// reg gathers, keyed by its labels other than stream and durable, which
// must be the configuration's (the ones every series of the pipeline
// carries).
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key, labels := "", map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				if l.GetName() != "stream" && l.GetName() != "durable" {
					key += l.GetName() + "=" + l.GetValue()
				}
			}
			assert.Equal(t, map[string]string{"stream": "METER_READS_7", "durable": "meter-consumer-7"},
				map[string]string{"stream": labels["stream"], "durable": labels["durable"]}, name)
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// fleetSeven is the configuration of a fleet on METER_READS_7 whose NATS
// server is not started yet (opts: it listens on the port cfg names), with
// an engine that answers every call 200.
func fleetSeven(t *testing.T) (config.Config, *server.Options) {
	t.Helper()
	engine := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(engine.Close)
	port := natstest.FreePort(t)
	opts := natstest.Options(t.TempDir())
	opts.Port = port

	cfg := config.Default()
	cfg.NATS.URL = "nats://127.0.0.1:" + strconv.Itoa(port)
	cfg.NATS.Embedded = false
	cfg.NATS.ConnectRetryMax = time.Second
	cfg.Stream.Name, cfg.Stream.Subjects = "METER_READS_7", []string{"meter.reads.7.>"}
	cfg.Consumer.Durable = "meter-consumer-7"
	cfg.DLQ.Stream, cfg.DLQ.Prefix = "METER_READS_7_DLQ", "meter.dlq.7"
	cfg.Downstream.URL = engine.URL
	cfg.HTTP.Addr = ""
	cfg.Shutdown.Timeout = time.Second
	require.NoError(t, cfg.Validate())
	return cfg, opts
}

// TestConsumingStateFromStart: from the moment the process starts, a
// replica says whether it consumes and, when not, why, as gauges labelled
// with its stream and durable: connecting while NATS does not answer,
// streams while the stream is missing, consuming once it pulls,
// disconnected while NATS is gone mid-run (each disconnection and
// reconnection counted), consuming again when NATS is back.
func TestConsumingStateFromStart(t *testing.T) {
	t.Parallel()
	cfg, opts := fleetSeven(t)

	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- service.Run(ctx, cfg, service.Deps{Registry: reg, Rand: retry.NewRand(7)}) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	state := func(wantConsuming float64, why string) func() bool {
		return func() bool {
			reasons := series(t, reg, "meter_consumer_not_consuming")
			if len(reasons) != len(service.Reasons()) {
				return false
			}
			for _, r := range service.Reasons() {
				want := 0.0
				if r == why {
					want = 1
				}
				if reasons["reason="+r] != want {
					return false
				}
			}
			return series(t, reg, "meter_consumer_consuming")[""] == wantConsuming
		}
	}
	const wait, tick = 20 * time.Second, 20 * time.Millisecond
	require.Eventually(t, state(0, service.WhyConnecting), wait, tick, "NATS does not answer: connecting")

	s, err := natstest.Serve(opts)
	require.NoError(t, err)
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	require.Eventually(t, state(0, service.WhyStreams), wait, tick, "NATS answers, the stream is missing: streams")

	_, js := natstest.Connect(t, s)
	_, err = topology.Ensure(t.Context(), js, service.Topology(cfg))
	require.NoError(t, err)
	require.Eventually(t, state(1, ""), wait, tick, "the stream is there: consuming")
	assert.Equal(t, map[string]float64{"event=disconnected": 0, "event=reconnected": 0},
		series(t, reg, "meter_consumer_nats_connection_events_total"))

	s.Shutdown()
	s.WaitForShutdown()
	require.Eventually(t, state(0, service.WhyDisconnected), wait, tick, "NATS gone mid-run: disconnected")
	assert.Equal(t, 1.0, series(t, reg, "meter_consumer_nats_connection_events_total")["event=disconnected"])

	s, err = natstest.Serve(opts)
	require.NoError(t, err)
	require.Eventually(t, state(1, ""), wait, tick, "NATS back: consuming again")
	assert.Equal(t, 1.0, series(t, reg, "meter_consumer_nats_connection_events_total")["event=reconnected"])
	// the pipeline's series carry the stream and the durable too (checked
	// by series)
	assert.Contains(t, series(t, reg, "meter_consumer_messages_total"), "outcome=ack")
}
