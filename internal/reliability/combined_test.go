//go:build soak

package reliability_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cutter is a TCP proxy to a NATS server whose connections can be cut at
// once, as a network path that drops them would.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cutter{ln: ln}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cutter) url() string { return "nats://" + c.ln.Addr().String() }

// cut closes every connection through the proxy.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// TestSoakCombinedFaults: a fleet of three on a three-node cluster, the
// head-ends publishing all along, under one fault after another: a
// SIGKILL, a process stopped past the ack wait, a cut NATS connection, the
// loss of the node leading the durable, an engine outage, a SIGTERM
// mid-load. The verdict is the suite's ledger and `consumer audit`'s
// (checkLedger runs both): every read billed once or dead-lettered once,
// none lost. Bounded: about a minute of faults, then the drain.
func TestSoakCombinedFaults(t *testing.T) {
	var down atomic.Bool
	s := newScenario(t, setup{cluster: true, latency: 2 * time.Millisecond, later: true,
		policy: func(string, int) int {
			if down.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}})
	a := s.start("a", "--create-streams")
	b := s.start("b")
	proxy := newCutter(t, fmt.Sprintf("127.0.0.1:%d", s.nodes[0].opts.Port))
	c := s.start("c", "--nats-url", proxy.url())

	ctx, stop := context.WithCancel(context.Background())
	var published sync.WaitGroup
	published.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			body, key := read("CMB", i)
			s.publishBody("meter.reads.CMB", body, key, nil)
			time.Sleep(10 * time.Millisecond)
		}
	})
	step := func(what string, wait time.Duration) {
		t.Logf("%s: %s", time.Now().Format(time.TimeOnly), what)
		time.Sleep(wait)
	}
	leader := func() *node {
		var name string
		require.Eventually(t, func() bool {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			cons, err := s.js.Consumer(cctx, "METER_READS", "meter-consumer")
			if err != nil {
				return false
			}
			ci, err := cons.Info(cctx)
			if err != nil || ci.Cluster == nil {
				return false
			}
			name = ci.Cluster.Leader
			return name != ""
		}, 30*time.Second, 100*time.Millisecond)
		return byName(s.nodes, name)
	}

	step("load", 4*time.Second)
	a.Kill()
	s.start("a2")
	step("SIGKILL a; a2 started", 5*time.Second)
	require.NoError(t, syscall.Kill(b.Pid(), syscall.SIGSTOP))
	step("SIGSTOP b, past the 3s ack wait", 5*time.Second)
	require.NoError(t, syscall.Kill(b.Pid(), syscall.SIGCONT))
	step("SIGCONT b", 4*time.Second)
	proxy.cut()
	step("c's NATS connection cut", 5*time.Second)
	n := leader()
	n.stop()
	step("the durable's leader "+n.opts.ServerName+" lost", 6*time.Second)
	n.start(t)
	step("the node back", 4*time.Second)
	down.Store(true)
	step("engine down", 6*time.Second)
	down.Store(false)
	step("engine back", 4*time.Second)
	code, _ := c.Term(20 * time.Second)
	require.Equal(t, 0, code, "c stopped cleanly")
	s.start("c2")
	step("SIGTERM c mid-load; c2 started", 4*time.Second)
	stop()
	published.Wait()
	began := time.Now()
	s.settled(3 * time.Minute)
	f := s.checkLedger(nil, 0)
	f.Recovery = time.Since(began)
	f.log(t, "combined")
}
