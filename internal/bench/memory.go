package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/stream"
)

// Memory is the consumer binary's resident memory while it drains a large
// backlog, and the in-process heap of the pipeline and of the bare loop.
type Memory struct {
	Child ChildMemory `json:"child"`
	Heap  HeapMemory  `json:"heap"`
}

// ChildMemory is the consumer binary, run as a child process with its
// production defaults against the in-process server.
type ChildMemory struct {
	Skipped    string        `json:"skipped,omitempty"`
	N          int           `json:"n"`
	Publish    time.Duration `json:"publish_ns"` // publishing the backlog first
	HWM        int64         `json:"vm_hwm_bytes"`
	PeakRSS    int64         `json:"peak_sampled_rss_bytes"` // VmRSS sampled every 50ms
	FirstRSS   int64         `json:"first_sampled_rss_bytes"`
	Drain      time.Duration `json:"drain_ns"`         // start of the child to the last ack
	Stall      time.Duration `json:"longest_stall_ns"` // longest time the ack floor did not move
	MsgsPerSec float64       `json:"msgs_per_sec"`
	Exit       string        `json:"exit"` // after SIGTERM
}

// HeapMemory is HeapInuse sampled every 50ms while draining N reads in this
// process. The in-process server's heap is in both figures.
type HeapMemory struct {
	N    int      `json:"n"`
	Bare HeapPeak `json:"bare"`
	Ours HeapPeak `json:"ours"`
}

// HeapPeak is HeapInuse after a collection before the run, and its peak.
type HeapPeak struct {
	Before uint64 `json:"before_bytes"`
	Peak   uint64 `json:"peak_bytes"`
}

func runMemory(ctx context.Context, e *env, cfg Config) (*Memory, error) {
	out := &Memory{}
	var err error
	if out.Heap, err = heapMemory(ctx, e, cfg.N); err != nil {
		return nil, fmt.Errorf("heap: %w", err)
	}
	cfg.progress("memory heap: bare peak %d MiB, ours peak %d MiB", out.Heap.Bare.Peak>>20, out.Heap.Ours.Peak>>20)
	if cfg.Binary == "" {
		out.Child.Skipped = "no consumer binary"
		return out, nil
	}
	if out.Child, err = childMemory(ctx, e, cfg); err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	cfg.progress("memory child: VmHWM %d MiB draining %d reads at %.0f/s", out.Child.HWM>>20, out.Child.N, out.Child.MsgsPerSec)
	return out, nil
}

func heapMemory(ctx context.Context, e *env, n int) (HeapMemory, error) {
	if err := e.reset(ctx); err != nil {
		return HeapMemory{}, err
	}
	last, err := publishBacklog(ctx, e.js, 0, n)
	if err != nil {
		return HeapMemory{}, err
	}
	out := HeapMemory{N: n}
	pipeline := ours(e, 1, func(js jetstream.JetStream) (stream.Options, error) {
		return pipelineOptions(js, e.topo, noop, 0), nil
	})
	for _, v := range []struct {
		name  string
		start starter
		to    *HeapPeak
	}{{"heap-bare", bare(e, 32), &out.Bare}, {"heap-ours", pipeline, &out.Ours}} {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		v.to.Before = ms.HeapInuse
		stop := sampleHeap()
		_, err := e.drain(ctx, v.name, 0, n, last, v.start)
		v.to.Peak = stop()
		if err != nil {
			return HeapMemory{}, err
		}
	}
	return out, nil
}

// sampleHeap samples HeapInuse every 50ms until stop, which returns the
// peak.
func sampleHeap() (stop func() uint64) {
	quit, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-quit:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(quit)
		return <-done
	}
}
