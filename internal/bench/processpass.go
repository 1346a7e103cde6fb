package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// processPass runs one process of the process scenario over a fresh
// backlog.
type processPass struct {
	e   *env
	eng *simengine.Server
	cfg Config
}

// window is what a pass reads at either end of its window.
type window struct {
	at    time.Time
	floor uint64
	cpu   time.Duration // the consumer's
	mem   memCounters   // the product's, from /metrics
}

// memCounters are a Go process's allocations and GC cycles so far.
type memCounters struct{ mallocs, bytes, gcs float64 }

// run publishes cfg.ProcessN reads on fresh streams, starts the bare
// consumer or the product binary on a fresh durable, polls the durable's
// ack floor every 5ms until it reaches the last read, reads the figures,
// and stops the process with SIGTERM.
func (p processPass) run(ctx context.Context, product bool, round int) (ProcessRun, error) {
	var r ProcessRun
	n, e, name := p.cfg.ProcessN, p.e, passName[product]
	if err := e.reset(ctx); err != nil {
		return r, err
	}
	durable := fmt.Sprintf("process-%s-%d", name, round)
	cons, err := e.durable(ctx, durable, 0)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	last, err := publishBodies(ctx, e.js, 0, n, processBody)
	if err != nil {
		return r, err
	}
	r.Publish = time.Since(t0)

	var cmd *exec.Cmd
	var pprofAddr string
	metricsAddr, err := natstest.Free()
	if err != nil {
		return r, err
	}
	if product {
		args := []string{"--nats-url", e.url, "--downstream-url", p.eng.URL, "--durable", durable,
			"--concurrency", strconv.Itoa(processWorkers), "--http-addr", metricsAddr, "--log-format", "json"}
		if p.cfg.ProcessProfile != "" {
			if pprofAddr, err = natstest.Free(); err != nil {
				return r, err
			}
			args = append(args, "--pprof-addr", pprofAddr)
		}
		cmd = exec.Command(p.cfg.Binary, args...)
	} else {
		args := append(slices.Clone(p.cfg.Bare[1:]), "--nats-url", e.url, "--stream", e.topo.Stream, "--durable", durable,
			"--url", p.eng.URL, "--workers", strconv.Itoa(processWorkers), "--pull", strconv.Itoa(processBarePull), "--http-addr", metricsAddr)
		cmd = exec.Command(p.cfg.Bare[0], args...)
		cmd.Env = append(os.Environ(), p.cfg.BareEnv...)
	}

	begin := window{at: time.Now()}
	c, err := startChild(cmd)
	if err != nil {
		return r, err
	}
	defer c.kill()
	sample := func(w *window) (err error) {
		if w.cpu, err = cpuOf(c.Process.Pid); err != nil {
			return err
		}
		w.mem, err = scrapeMemCounters(ctx, metricsAddr)
		return err
	}

	var first, end *window
	var profiling sync.WaitGroup
	var profileErr error
	ctx, cancel := context.WithTimeout(ctx, drainTimeout(n))
	defer cancel()
	// A window opens at the first floor read that moved, and closes at the
	// one that reached the last read.
	_, err = e.waitAcked(ctx, cons, last, 5*time.Millisecond, c.exited, func(floor uint64) error {
		if floor < last && (first != nil || floor == 0) {
			return nil
		}
		w := &window{at: time.Now(), floor: floor}
		if err := sample(w); err != nil {
			return err
		}
		if floor >= last {
			end = w
			return nil
		}
		first = w
		if pprofAddr != "" {
			profiling.Go(func() { profileErr = p.profile(ctx, pprofAddr, round) })
		}
		return nil
	})
	switch {
	case errors.Is(err, errEnded):
		return r, fmt.Errorf("%s exited before the backlog was acked (%v); stderr: %s", name, c.err, c.out)
	case err != nil:
		return r, fmt.Errorf("drain: %w; stderr: %s", err, c.out)
	}
	r.From = "first ack"
	if first == nil {
		first, r.From = &begin, "start"
	}
	r.Startup, r.Window, r.WindowReads = first.at.Sub(begin.at), end.at.Sub(first.at), int(last-first.floor)
	reads := float64(r.WindowReads)
	r.ReadsPerSec = reads / r.Window.Seconds()
	r.StartToEnd = float64(n) / end.at.Sub(begin.at).Seconds()
	r.CPUMicros = float64((end.cpu - first.cpu).Microseconds()) / reads
	mem := memCounters{end.mem.mallocs - first.mem.mallocs, end.mem.bytes - first.mem.bytes, end.mem.gcs - first.mem.gcs}
	r.Mallocs, r.AllocBytes, r.GCPer1000 = mem.mallocs/reads, mem.bytes/reads, 1000*mem.gcs/reads
	if r.HWM, err = vmHWM(c.Process.Pid); err != nil {
		return r, err
	}
	if profiling.Wait(); profileErr != nil {
		return r, fmt.Errorf("profile: %w", profileErr)
	}

	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		return r, fmt.Errorf("SIGTERM: %w", err)
	}
	if err := c.wait(30 * time.Second); err != nil {
		return r, fmt.Errorf("%s after SIGTERM: %w; stderr: %s", name, err, c.out)
	}
	return r, nil
}

// profile fetches a CPU profile of the product from its pprof server over
// the next ProcessProfileFor and writes it to <ProcessProfile>-<round>.pprof.
func (p processPass) profile(ctx context.Context, addr string, round int) error {
	b, err := httpGet(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(p.cfg.ProcessProfileFor.Seconds())))
	if err != nil {
		return err
	}
	return os.WriteFile(fmt.Sprintf("%s-%d.pprof", p.cfg.ProcessProfile, round+1), b, 0o644)
}

// scrapeMemCounters reads go_memstats_mallocs_total,
// go_memstats_alloc_bytes_total and go_gc_duration_seconds_count from the
// /metrics at addr.
func scrapeMemCounters(ctx context.Context, addr string) (m memCounters, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, err := httpGet(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	for name, v := range map[string]*float64{"go_memstats_mallocs_total": &m.mallocs, "go_memstats_alloc_bytes_total": &m.bytes, "go_gc_duration_seconds": &m.gcs} {
		ms := mfs[name].GetMetric()
		if len(ms) == 0 {
			return memCounters{}, fmt.Errorf("metrics at %s: %s missing", addr, name)
		}
		// A counter has no summary and the reverse: the sum is the one there is.
		*v = ms[0].GetCounter().GetValue() + float64(ms[0].GetSummary().GetSampleCount())
	}
	return m, nil
}

// httpGet is url's body; a status other than 200 is an error.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
