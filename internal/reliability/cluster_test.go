package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// node is one member of a test cluster, restartable with the same options.
type node struct {
	opts *server.Options
	srv  *server.Server
}

// newCluster starts a three-node JetStream cluster on loopback.
func newCluster(t *testing.T) []*node {
	t.Helper()
	var routes []string
	nodes := make([]*node, 3)
	for i := range nodes {
		o := natstest.Options(t.TempDir())
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Port = natstest.FreePort(t)
		o.Cluster = server.ClusterOpts{Name: "meter", Host: "127.0.0.1", Port: natstest.FreePort(t)}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.Cluster.Port))
		nodes[i] = &node{opts: o}
	}
	for _, n := range nodes {
		n.opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	}
	for _, n := range nodes {
		n.start(t)
	}
	return nodes
}

func (n *node) start(t *testing.T) {
	t.Helper()
	o := *n.opts
	n.srv = natstest.Start(t, &o)
}

func (n *node) stop() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

func clusterURL(nodes []*node) string {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port))
	}
	return strings.Join(urls, ",")
}

func byName(nodes []*node, name string) *node {
	for _, n := range nodes {
		if n.opts.ServerName == name {
			return n
		}
	}
	return nil
}

// Scenario 5: a three-node cluster with R3 streams loses the stream leader,
// then the consumer leader, mid-run.
func TestClusterLosesItsLeaders(t *testing.T) {
	t.Parallel()
	s := newScenario(t, setup{cluster: true, latency: 2 * time.Millisecond})

	leader := func(consumer bool) string {
		var name string
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if consumer {
				c, err := s.js.Consumer(ctx, "METER_READS", "meter-consumer")
				if err != nil {
					return false
				}
				ci, err := c.Info(ctx)
				if err != nil || ci.Cluster == nil {
					return false
				}
				name = ci.Cluster.Leader
			} else {
				st, err := s.js.Stream(ctx, "METER_READS")
				if err != nil {
					return false
				}
				si, err := st.Info(ctx)
				if err != nil || si.Cluster == nil {
					return false
				}
				name = si.Cluster.Leader
			}
			return name != ""
		}, 30*time.Second, 100*time.Millisecond)
		return name
	}

	s.publish("CLA", 150, time.Millisecond)
	streamLeader := byName(s.nodes, leader(false))
	streamLeader.stop()
	began := time.Now()
	s.publish("CLB", 150, time.Millisecond)
	streamLeader.start(t) // back, so the next loss keeps a quorum
	s.publish("CLC", 150, time.Millisecond)
	consumerLeader := byName(s.nodes, leader(true))
	consumerLeader.stop()
	s.publish("CLD", 150, time.Millisecond)
	s.settled(90 * time.Second)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(began)
	f.log(t, "cluster-leaders")
}
