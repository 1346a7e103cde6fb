package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/internal/simengine"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// TestHTTPFactors is a diagnostic, not a test: it asserts nothing and runs
// only when asked, for about a minute and a half:
//
//	BENCH_HTTP_FACTORS=1 go test -run HTTPFactors -v -count=1 ./internal/bench
//
// It measures what moves the http scenario's ratio (the pipeline's rate
// against the bare client's): each variant is the production options with one
// thing changed, drained after a bare pass against the same engine, three
// rounds, and the median ratio and CPU per read are logged
// (docs/PERFORMANCE.md, "HTTP end to end"). BENCH_HTTP_FACTORS_ONLY=<part of
// a name> runs the first variant and the ones named.
func TestHTTPFactors(t *testing.T) {
	if os.Getenv("BENCH_HTTP_FACTORS") == "" {
		t.Skip("a diagnostic: BENCH_HTTP_FACTORS=1 runs it")
	}
	ctx := context.Background()
	srv, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e, err := newEnv(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if err := e.reset(ctx); err != nil {
		t.Fatal(err)
	}
	n := 50_000
	last, err := publishBacklog(ctx, e.js, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	bodies, keys := make([][]byte, n), make([]string, n)
	for i := range n {
		if bodies[i], keys[i], err = Normalised(i); err != nil {
			t.Fatal(err)
		}
	}
	re, err := startRateEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer re.close()
	eng, err := simengine.New(simengine.Options{Keep: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	es := simengine.NewServer(eng)
	defer es.Close()

	type variant struct {
		name  string
		url   string
		build func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error)
		pub   bool // publish during
	}
	base := func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error) {
		sink, err := httpSink(url)
		if err != nil {
			return stream.Options{}, err
		}
		o, _, err := productionOptions(ctx, js, topo, sink, prometheus.NewRegistry(), false, 1)
		return o, err
	}
	with := func(f func(*stream.Options)) func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error) {
		return func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error) {
			o, err := base(js, topo, url)
			f(&o)
			return o, err
		}
	}
	only := os.Getenv("BENCH_HTTP_FACTORS_ONLY")
	vs := []variant{
		{"production options, limit off (the reference)", re.URL, base, false},
		{"no breaker, no records (pipelineOptions)", re.URL, func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error) {
			sink, err := httpSink(url)
			if err != nil {
				return stream.Options{}, err
			}
			return pipelineOptions(js, topo, sink, 0), nil
		}, false},
		{"adaptive limit on", re.URL, func(js jetstream.JetStream, topo topology.Topology, url string) (stream.Options, error) {
			sink, err := httpSink(url)
			if err != nil {
				return stream.Options{}, err
			}
			o, _, err := productionOptions(ctx, js, topo, sink, prometheus.NewRegistry(), true, 1)
			return o, err
		}, false},
		{"pull 32", re.URL, with(func(o *stream.Options) { o.PullBatch = 32 }), false},
		{"log level debug", re.URL, with(func(o *stream.Options) {
			o.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}), false},
		{"handler timeout 4s < the sink's 5s: a deadline per call", re.URL, with(func(o *stream.Options) { o.HandlerTimeout = 4 * time.Second }), false},
		{"simengine engine (bare client too)", es.URL, base, false},
		{"reads published during the drain", re.URL, base, true},
	}
	rounds := 3
	type res struct{ ratios, cpu, bareCPU []float64 }
	results := map[string]*res{}
	for round := range rounds {
		for i, v := range vs {
			if only != "" && !strings.Contains(v.name, only) && i != 0 {
				continue
			}
			bareURL := v.url
			br, err := timeRun(n, func() error { return postAll(ctx, bareURL, bodies, keys) })
			if err != nil {
				t.Fatal(err)
			}
			durable := fmt.Sprintf("f-%d-%d", round, i)
			topo := e.topo
			topo.Durable = durable
			lastSeq := last
			if v.pub {
				// a fresh backlog published while draining
				if err := e.reset(ctx); err != nil {
					t.Fatal(err)
				}
				lastSeq = uint64(n)
			}
			var pubErr chan error
			r, err := e.drain(ctx, durable, 0, n, lastSeq, func(ctx context.Context, d string) (*running, error) {
				rr, err := ours(e, 1, func(js jetstream.JetStream) (stream.Options, error) { return v.build(js, topo, v.url) })(ctx, d)
				if v.pub {
					pubErr = make(chan error, 1)
					go func() { _, err := publishBacklog(ctx, e.js, 0, n); pubErr <- err }()
				}
				return rr, err
			})
			if err != nil {
				t.Fatal(v.name, err)
			}
			if v.pub {
				if err := <-pubErr; err != nil {
					t.Fatal(err)
				}
				// restore the backlog for the others
				if err := e.reset(ctx); err != nil {
					t.Fatal(err)
				}
				if last, err = publishBacklog(ctx, e.js, 0, n); err != nil {
					t.Fatal(err)
				}
			}
			x := results[v.name]
			if x == nil {
				x = &res{}
				results[v.name] = x
			}
			x.ratios = append(x.ratios, r.rate()/br.rate())
			x.cpu = append(x.cpu, float64(r.cpu.Nanoseconds())/float64(n)/1e3)
			x.bareCPU = append(x.bareCPU, float64(br.cpu.Nanoseconds())/float64(n)/1e3)
			t.Logf("round %d %-58s bare %6.0f/s %5.1fµs  ours %6.0f/s %5.1fµs  ratio %.2f  cpu ratio %.2f", round, v.name,
				br.rate(), float64(br.cpu.Nanoseconds())/float64(n)/1e3, r.rate(), float64(r.cpu.Nanoseconds())/float64(n)/1e3,
				r.rate()/br.rate(), float64(br.cpu)/float64(r.cpu))
		}
	}
	for _, v := range vs {
		x := results[v.name]
		if x == nil {
			continue
		}
		rs := slices.Clone(x.ratios)
		slices.Sort(rs)
		c, b := slices.Clone(x.cpu), slices.Clone(x.bareCPU)
		slices.Sort(c)
		slices.Sort(b)
		t.Logf("%-58s ratio median %.2f (min %.2f max %.2f)  cpu/msg median ours %.1fµs bare %.1fµs -> %.2f", v.name,
			rs[len(rs)/2], rs[0], rs[len(rs)-1], c[len(c)/2], b[len(b)/2], b[len(b)/2]/c[len(c)/2])
	}
}
