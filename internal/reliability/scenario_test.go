package reliability_test

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

// setup is what a scenario differs in. The zero setup is one JetStream
// server, a rate engine that answers 200 at once to every call, and one
// consumer named "consumer" run with the fast flags and --create-streams.
type setup struct {
	// server changes the NATS server's options, at every start (a max
	// payload, the authentication).
	server func(*server.Options)
	// tls makes the server require mutual TLS with these certificates; the
	// test and the consumers connect with its client certificate.
	tls *pki
	// cluster runs a three-node cluster instead of one server (tls and
	// server do not apply), and the consumers with --replicas 3.
	cluster bool
	// client are options of the test's own connection.
	client []nats.Option

	// policy is the engine's status for call n of key (nil: 200).
	policy func(key string, n int) int
	// latency is every call's service time.
	latency time.Duration

	// consumers are the names of the consumers started, each with
	// --create-streams and args (default: one, "consumer").
	consumers []string
	// later starts no consumer: the test prepares the streams first, then
	// starts them with scenario.start.
	later bool
	// args are flags of the consumers started, after the scenario's; env is
	// their extra environment (of every consumer the scenario starts).
	args, env []string
	// defaults runs every consumer with its default policy: baseFlags, not
	// fast.
	defaults bool
	// binary is the consumer binary the scenario runs (default: the
	// package's, built with -race).
	binary string
}

// scenario is one test's world: the NATS side (the embedded world: the
// test's connection and the reads it published), the rate engine, and the
// consumers it started.
type scenario struct {
	*world
	setup  setup
	nats   *natstest.Restartable // the server; nil for a cluster
	nodes  []*node               // the cluster's nodes; nil otherwise
	engine *engine

	consumers []*proctest.Proc // as setup.consumers names them
	consumer  *proctest.Proc   // the first of them
}

// newScenario starts what su says and waits until its consumers consume.
// Everything stops when the test ends.
func newScenario(t *testing.T, su setup) *scenario {
	t.Helper()
	s := &scenario{setup: su}
	var url string
	var client []nats.Option
	if su.cluster {
		s.nodes = newCluster(t)
		url = clusterURL(s.nodes)
	} else {
		var change []func(*server.Options)
		if su.tls != nil {
			change = append(change, mutualTLS(t, *su.tls))
			client = []nats.Option{nats.RootCAs(su.tls.ca), nats.ClientCert(su.tls.clientCert, su.tls.clientKey)}
		}
		if su.server != nil {
			change = append(change, su.server)
		}
		s.nats = natstest.RunRestartable(t, change...)
		url = s.nats.URL()
		if su.tls != nil {
			url = "tls://" + s.nats.Addr()
		}
	}
	s.world = newWorldOpts(t, url, slices.Concat(su.client, client)...)
	if su.cluster {
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := s.js.AccountInfo(ctx)
			return err == nil
		}, 30*time.Second, 100*time.Millisecond, "JetStream cluster never came up")
	}
	s.engine = newEngine(t, su.policy)
	if su.latency > 0 {
		s.engine.setLatency(su.latency)
	}
	if su.later {
		return s
	}
	names := su.consumers
	if len(names) == 0 {
		names = []string{"consumer"}
	}
	for _, name := range names {
		s.consumers = append(s.consumers, s.start(name, slices.Concat([]string{"--create-streams"}, su.args)...))
	}
	s.consumer = s.consumers[0]
	return s
}

// flags are the scenario's flags (its NATS URL, its engine, the client
// certificate, a cluster's replicas), then args.
func (s *scenario) flags(args ...string) []string {
	out := []string{"--nats-url", s.url, "--downstream-url", s.engine.srv.URL}
	if p := s.setup.tls; p != nil {
		out = append(out, "--nats-ca", p.ca, "--nats-cert", p.clientCert, "--nats-key", p.clientKey)
	}
	if s.setup.cluster {
		out = append(out, "--replicas", "3")
	}
	return append(out, args...)
}

// start starts a consumer named name with the scenario's flags and
// environment, then args (no --create-streams unless given), and waits
// until it consumes.
func (s *scenario) start(name string, args ...string) *proctest.Proc {
	s.t.Helper()
	base := fast
	if s.setup.defaults {
		base = baseFlags
	}
	return startProcOf(s.t, cmp.Or(s.setup.binary, binary), name, base, s.setup.env, s.flags(args...))
}

// outage is a policy that answers 503 to every call until heal is called,
// 200 after.
func outage() (policy func(key string, n int) int, heal func()) {
	var down atomic.Bool
	down.Store(true)
	return func(string, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}, func() { down.Store(false) }
}
