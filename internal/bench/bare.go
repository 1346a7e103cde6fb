package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BareConsumer is the process scenario's bare baseline, run as a process of
// its own (consumer-bench bare-consumer): the bench's bare client (bare)
// posting each read with the product's HTTP sink from --workers goroutines,
// pulling --pull at a time, acking a 2xx and NAKing anything else, until ctx
// ends (SIGTERM). It serves the Go runtime's metrics on --http-addr, as the
// binary does, so that both are read the same way.
func BareConsumer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bare-consumer", flag.ContinueOnError)
	e := &env{topo: productionTopology()}
	fs.StringVar(&e.url, "nats-url", "", "NATS server URL")
	fs.StringVar(&e.topo.Stream, "stream", e.topo.Stream, "stream")
	var (
		durable = fs.String("durable", "", "durable consumer, already created")
		post    = fs.String("url", "", "URL the reads are posted to")
		workers = fs.Int("workers", httpConcurrency, "goroutines posting")
		pull    = fs.Int("pull", 500, "PullMaxMessages")
		addr    = fs.String("http-addr", "", "host:port of /metrics")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if e.url == "" || *durable == "" || *post == "" || *addr == "" || *workers < 1 || *pull < 1 {
		return errors.New("bare-consumer: --nats-url, --durable, --url, --http-addr, --workers and --pull >= 1 are required")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("bare-consumer: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(ln) }() // ends with Close
	defer srv.Close()
	r, err := bare(e, bareSpec{url: *post, workers: *workers, pull: *pull})(ctx, *durable)
	if err != nil {
		return fmt.Errorf("bare-consumer: %w", err)
	}
	<-ctx.Done()
	return r.stop()
}
