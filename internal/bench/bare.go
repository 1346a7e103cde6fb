package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
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
// its own (consumer-bench bare-consumer): the least a consumer can do.
// It connects, Consumes the durable with a pull of --pull, hands each
// message to --workers goroutines that POST its body as it is, with the
// Idempotency-Key the product derives (meter.Decode), and Ack on a 2xx
// (Nak otherwise). After --n acks it prints BareStats as one JSON line and
// exits; with --linger it then waits for ctx to end (SIGTERM), so that its
// /proc figures can be read while it still runs.
func BareConsumer(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bare-consumer", flag.ContinueOnError)
	e := &env{topo: productionTopology()}
	fs.StringVar(&e.url, "nats-url", "", "NATS server URL")
	fs.StringVar(&e.topo.Stream, "stream", e.topo.Stream, "stream")
	var (
		durable = fs.String("durable", "", "durable consumer, already created")
		post    = fs.String("url", "", "URL the bodies are posted to")
		workers = fs.Int("workers", fanOutWorkers, "goroutines posting")
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
	nc, _, cons, err := connect(ctx, e, "bench-bare-process", *durable)
	if err != nil {
		return fmt.Errorf("bare-consumer: %w", err)
	}
	defer nc.Close()

	var first, last runtime.MemStats
	client := &http.Client{Transport: downstream.NewTransport(*workers)}
	defer client.CloseIdleConnections()
	var acked atomic.Int64
	var firstOnce sync.Once
	done := make(chan struct{})
	dispatch, stop := workerPool(*workers, func(m jetstream.Msg) {
		r, err := meter.Decode(m.Data())
		if err != nil {
			_ = m.Term()
			return
		}
		if !postRaw(ctx, client, *post, m.Data(), r.IdempotencyKey) {
			_ = m.Nak()
			return
		}
		_ = m.Ack()
		if k := acked.Add(1); k == 1 || k == *n {
			firstOnce.Do(func() { runtime.ReadMemStats(&first) }) // at the nth, waits for the first's reading
			if k == *n {
				runtime.ReadMemStats(&last)
				close(done)
			}
		}
	})
	cc, err := cons.Consume(dispatch, jetstream.PullMaxMessages(*pull))
	if err != nil {
		stop()
		return fmt.Errorf("bare-consumer: consume: %w", err)
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
			cc.Stop()
			stop()
			return fmt.Errorf("bare-consumer: stopped after %d of %d acks", acked.Load(), *n)
		}
	}
	ferr := nc.Flush() // the acks reach the server
	st := BareStats{Window: *n - 1, Mallocs: last.Mallocs - first.Mallocs, Bytes: last.TotalAlloc - first.TotalAlloc, NumGC: last.NumGC - first.NumGC}
	if err := json.NewEncoder(stdout).Encode(st); err != nil {
		return errors.Join(ferr, fmt.Errorf("bare-consumer: %w", err))
	}
	if *linger {
		<-ctx.Done()
	}
	cc.Stop()
	stop()
	select {
	case <-cc.Closed():
	case <-time.After(10 * time.Second):
	}
	return errors.Join(ferr, drainConn(nc, 10*time.Second))
}

// postRaw posts body as it is, with the Idempotency-Key, as the HTTP sink
// does (the same transport and headers, a 5s timeout), and reports a 2xx.
func postRaw(ctx context.Context, client *http.Client, url string, body []byte, key string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode <= 299
}
