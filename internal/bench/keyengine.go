package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// keyEngine is the process scenario's engine: simengine's, answering 200 at
// once, keeping no ledger, and counting the calls of each read's key and
// the bodies that do not hold their key's meter id.
type keyEngine struct {
	*simengine.Server
	URL  string // where the reads are posted
	pass atomic.Pointer[keyCounts]
}

// keyCounts are the calls of one pass, by read index.
type keyCounts struct {
	calls      []atomic.Int32
	mismatched atomic.Int64 // a key of no read of the pass, or a body without its meter id
}

// KeyTally is what the engine saw of one pass.
type KeyTally struct {
	Calls      int64 `json:"calls"`
	Duplicated int   `json:"duplicated_keys"` // called more than once
	Missed     int   `json:"missed_keys"`     // never called
	Mismatched int64 `json:"mismatched"`      // a key of no read, or a body without its key's meter id
}

func startKeyEngine() (*keyEngine, error) {
	k := &keyEngine{}
	eng, err := simengine.New(simengine.Options{Keep: func(string) bool { return false }, Check: k.check})
	if err != nil {
		return nil, fmt.Errorf("key engine: %w", err)
	}
	k.Server = simengine.NewServer(eng)
	k.URL = k.Server.URL + "/reads"
	return k, nil
}

// expect starts counting a pass of reads 0 to n-1.
func (k *keyEngine) expect(n int) *keyCounts {
	c := &keyCounts{calls: make([]atomic.Int32, n)}
	k.pass.Store(c)
	return c
}

// check counts a call; it never refuses one.
func (k *keyEngine) check(r *http.Request, body []byte) error {
	c := k.pass.Load()
	if c == nil {
		return nil
	}
	key := r.Header.Get(simengine.KeyHeader)
	i, ok := Index(key)
	if !ok || i >= len(c.calls) {
		c.mismatched.Add(1)
		return nil
	}
	c.calls[i].Add(1)
	if id, _, _ := strings.Cut(key, "@"); !bytes.Contains(body, []byte(`"`+id+`"`)) {
		c.mismatched.Add(1)
	}
	return nil
}

func (c *keyCounts) tally() KeyTally {
	t := KeyTally{Mismatched: c.mismatched.Load()}
	for i := range c.calls {
		switch n := c.calls[i].Load(); {
		case n == 0:
			t.Missed++
		case n > 1:
			t.Duplicated++
		}
		t.Calls += int64(c.calls[i].Load())
	}
	return t
}

// memCounters are a Go process's allocations and GC cycles so far.
type memCounters struct{ mallocs, bytes, gcs float64 }

// scrapeMemCounters reads go_memstats_mallocs_total,
// go_memstats_alloc_bytes_total and go_gc_duration_seconds_count from the
// product's /metrics at addr.
func scrapeMemCounters(ctx context.Context, addr string) (memCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return memCounters{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return memCounters{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return memCounters{}, fmt.Errorf("metrics: %w", err)
	}
	mallocs, alloc, gcs := mfs["go_memstats_mallocs_total"], mfs["go_memstats_alloc_bytes_total"], mfs["go_gc_duration_seconds"]
	if len(mallocs.GetMetric()) == 0 || len(alloc.GetMetric()) == 0 || len(gcs.GetMetric()) == 0 {
		return memCounters{}, fmt.Errorf("metrics at %s: go_memstats_mallocs_total, go_memstats_alloc_bytes_total or go_gc_duration_seconds missing", addr)
	}
	m := memCounters{mallocs: mallocs.GetMetric()[0].GetCounter().GetValue(), bytes: alloc.GetMetric()[0].GetCounter().GetValue(),
		gcs: float64(gcs.GetMetric()[0].GetSummary().GetSampleCount())}
	return m, nil
}
