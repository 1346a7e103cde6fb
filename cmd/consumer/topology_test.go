package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// A durable paused by an operator delivers nothing: the process says so
// once in the log, /readyz is not ready and says until when and how to
// resume, and the gauge is 1; on a real server each single-replica stream
// or bucket is warned of, by name.
func TestAPausedDurableIsSaidSoOnReadyz(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--http-addr", "127.0.0.1:0",
		"--downstream-url", "http://127.0.0.1:1/reads")
	httpAddr(t, p)
	require.Equal(t, 0, stop(p, 15*time.Second))
	for _, of := range []string{"stream", "dead_letter_stream", "records_bucket"} {
		found := false
		for _, l := range p.Records("a single copy of what the service bills from: one lost disk loses it; use 3 replicas across zones (see docs/OPERATIONS.md, Durability)") {
			found = found || l["of"] == of
		}
		assert.True(t, found, "the %s's single copy is warned of", of)
	}

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	_, err := js.PauseConsumer(t.Context(), "METER_READS", "meter-consumer", until)
	require.NoError(t, err)
	p = start(t, "--nats-url", s.ClientURL(), "--http-addr", "127.0.0.1:0", "--downstream-url", "http://127.0.0.1:1/reads")
	addr := httpAddr(t, p)
	require.Eventually(t, func() bool {
		c, b := get(t, "http://"+addr+"/readyz")
		return c == 503 && strings.Contains(b, "the durable meter-consumer is paused until "+until.Format(time.RFC3339)) &&
			strings.Contains(b, "nats consumer resume METER_READS meter-consumer")
	}, 10*time.Second, 20*time.Millisecond)
	_, body := get(t, "http://"+addr+"/metrics")
	assert.Contains(t, body, `meter_consumer_durable_paused{durable="meter-consumer",stream="METER_READS"} 1`)
	assert.Contains(t, body, `meter_consumer_topology_replicas{durable="meter-consumer",of="stream",stream="METER_READS"} 1`)
	assert.Contains(t, body, `meter_consumer_not_consuming{durable="meter-consumer",reason="paused",stream="METER_READS"} 1`)
	assert.Equal(t, 1, p.Count("the durable is paused: the server delivers nothing until the pause ends"))
	assert.Equal(t, 0, stop(p, 15*time.Second))
}

// --create-streams on a real server makes three copies unless one is asked
// for: on a single server, the default stops start-up naming the setting,
// and nothing is made.
func TestCreateStreamsOnARealServerDefaultsToThreeReplicas(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	p := proctest.Start(t, "consumer", binary, []string{"HOME=" + t.TempDir()}, "--log-format", "json",
		"--nats-url", s.ClientURL(), "--create-streams", "--http-addr", "", "--downstream-url", "http://127.0.0.1:1/reads")
	require.Eventually(t, p.Exited, 20*time.Second, 20*time.Millisecond, "start-up is refused, not waited out")
	assert.Contains(t, p.Output(), "stream.replicas is 3 and the server is not clustered")
	_, err := js.Stream(t.Context(), "METER_READS")
	assert.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}

// A dead-letter stream that would lose confirmed copies stops start-up at
// once, with the setting and the fix; it is not waited out.
func TestAnInterestDeadLetterStreamStopsStartUp(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := service.Topology(must(config.Load([]string{"--nats-url", s.ClientURL(), "--replicas", "1", "--downstream-url", "http://127.0.0.1:1/reads"}, nil)))
	_, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(t.Context(), topo.DLQStream))
	cfg := topo.DLQStreamConfig()
	cfg.Retention = jetstream.InterestPolicy
	_, err = js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)

	p := start(t, "--nats-url", s.ClientURL(), "--http-addr", "", "--downstream-url", "http://127.0.0.1:1/reads")
	require.Eventually(t, p.Exited, 20*time.Second, 20*time.Millisecond, "start-up is refused, not waited out")
	assert.Contains(t, p.Output(), "dead-letter stream METER_READS_DLQ: settings the service cannot run on: retention is Interest, not Limits")
	assert.Contains(t, p.Output(), "(--reconcile changes it)")
}

// A durable whose ack wait is shorter than consumer.handler_timeout stops
// start-up with the binary's settings and the fix; the pipeline's own
// message names only its options.
func TestADurableAckWaitShorterThanTheHandlerTimeoutStopsStartUp(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := service.Topology(must(config.Load([]string{"--nats-url", s.ClientURL(), "--replicas", "1", "--downstream-url", "http://127.0.0.1:1/reads"}, nil)))
	topo.AckWait = 2 * time.Second
	_, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)

	p := start(t, "--nats-url", s.ClientURL(), "--http-addr", "", "--downstream-url", "http://127.0.0.1:1/reads",
		"--handler-timeout", "3s")
	require.Eventually(t, p.Exited, 20*time.Second, 20*time.Millisecond, "start-up is refused, not waited out")
	assert.Contains(t, p.Output(), "consumer.handler_timeout (3s) must be shorter than the durable's ack wait (2s)")
	assert.Contains(t, p.Output(), "(--reconcile sets it to consumer.ack_wait)")
}
