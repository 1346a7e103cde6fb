package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// BareStats is the line the bare consumer prints on stdout once it has
// acked its n reads: its runtime.MemStats counters (Mallocs, TotalAlloc,
// NumGC) from its first ack to its nth.
type BareStats struct {
	Window  int64  `json:"window_acks"` // acks after the first: the reads the deltas are over
	Mallocs uint64 `json:"mallocs"`
	Bytes   uint64 `json:"alloc_bytes"` // TotalAlloc
	NumGC   uint32 `json:"num_gc"`
}

// BareConsumer is the process scenario's bare baseline, run as a process of
// its own (consumer-bench bare-consumer): the bench's bare client (bare)
// posting each read with the product's HTTP sink from --workers goroutines,
// pulling --pull at a time, acking a 2xx and NAKing anything else. After --n
// acks it prints BareStats as one JSON line; with --linger it then waits for
// ctx to end (SIGTERM), so that its /proc figures can be read while it still
// runs.
func BareConsumer(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bare-consumer", flag.ContinueOnError)
	e := &env{topo: productionTopology()}
	fs.StringVar(&e.url, "nats-url", "", "NATS server URL")
	fs.StringVar(&e.topo.Stream, "stream", e.topo.Stream, "stream")
	var (
		durable = fs.String("durable", "", "durable consumer, already created")
		post    = fs.String("url", "", "URL the reads are posted to")
		workers = fs.Int("workers", httpConcurrency, "goroutines posting")
		pull    = fs.Int("pull", 500, "PullMaxMessages")
		n       = fs.Int64("n", 0, "acks before it prints its stats")
		linger  = fs.Bool("linger", false, "after the n acks, wait for SIGTERM before exiting")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if e.url == "" || *durable == "" || *post == "" || *n < 1 || *workers < 1 || *pull < 1 {
		return errors.New("bare-consumer: --nats-url, --durable, --url, --n >= 1, --workers and --pull >= 1 are required")
	}
	var first, last runtime.MemStats
	var acks atomic.Int64
	var firstOnce sync.Once
	done := make(chan struct{})
	r, err := bare(e, bareSpec{url: *post, workers: *workers, pull: *pull, acked: func() {
		if k := acks.Add(1); k == 1 || k == *n {
			firstOnce.Do(func() { runtime.ReadMemStats(&first) }) // at the nth, waits for the first's reading
			if k == *n {
				runtime.ReadMemStats(&last)
				close(done)
			}
		}
	}})(ctx, *durable)
	if err != nil {
		return fmt.Errorf("bare-consumer: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		// The bench stops us once the ack floor reaches n, which can be
		// before the worker that sent the nth ack has counted it and taken
		// the last reading: give it a moment, since the stats line is owed.
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			return errors.Join(fmt.Errorf("bare-consumer: stopped after %d of %d acks", acks.Load(), *n), r.stop())
		}
	}
	st := BareStats{Window: *n - 1, Mallocs: last.Mallocs - first.Mallocs, Bytes: last.TotalAlloc - first.TotalAlloc, NumGC: last.NumGC - first.NumGC}
	if err := json.NewEncoder(stdout).Encode(st); err != nil {
		return errors.Join(fmt.Errorf("bare-consumer: %w", err), r.stop())
	}
	if *linger {
		<-ctx.Done()
	}
	return r.stop()
}
