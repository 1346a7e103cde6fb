package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// processPass runs one process of the process scenario over a fresh
// backlog.
type processPass struct {
	e   *env
	srv *natsProc
	eng *keyEngine
	cfg Config
}

// window is what a pass reads at either end of its window.
type window struct {
	at               time.Time
	floor            uint64
	proc, srv, bench procSample
	mem              memCounters // the product's, from /metrics
}

// run publishes cfg.ProcessN reads on fresh streams, starts the bare
// consumer or the product binary on a fresh durable, polls the durable's
// ack floor every 5ms until it reaches the last read, reads the figures,
// and stops the process with SIGTERM.
func (p processPass) run(ctx context.Context, product bool, round int) (ProcessRun, error) {
	var r ProcessRun
	n, e := p.cfg.ProcessN, p.e
	if err := e.reset(ctx); err != nil {
		return r, err
	}
	name := "bare"
	if product {
		name = "product"
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
	tally := p.eng.expect(n)

	var cmd *exec.Cmd
	var metricsAddr, pprofAddr string
	if product {
		if metricsAddr, err = freeAddr(); err != nil {
			return r, err
		}
		args := []string{"--nats-url", e.url, "--downstream-url", p.eng.URL, "--durable", durable,
			"--concurrency", strconv.Itoa(processWorkers), "--http-addr", metricsAddr, "--log-format", "json"}
		if p.cfg.ProcessProfile != "" {
			if pprofAddr, err = freeAddr(); err != nil {
				return r, err
			}
			args = append(args, "--pprof-addr", pprofAddr)
		}
		cmd = exec.Command(p.cfg.Binary, args...)
	} else {
		args := append(slices.Clone(p.cfg.Bare[1:]), "--nats-url", e.url, "--stream", e.topo.Stream, "--durable", durable,
			"--url", p.eng.URL, "--workers", strconv.Itoa(processWorkers), "--pull", strconv.Itoa(processBarePull),
			"--n", strconv.Itoa(n), "--linger")
		cmd = exec.Command(p.cfg.Bare[0], args...)
		cmd.Env = append(os.Environ(), p.cfg.BareEnv...)
	}
	var stdout bytes.Buffer
	stderr := &tail{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if product {
		cmd.Stdout = stderr
	}
	begin := window{floor: 0}
	if begin.srv, err = sampleProc(p.srv.pid()); err != nil {
		return r, err
	}
	if begin.bench, err = sampleProc(os.Getpid()); err != nil {
		return r, err
	}
	begin.at = time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{}) // closed once exitErr is set
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill() // if it still runs
		<-exited
	}()

	sample := func(w *window) error {
		var err error
		if w.proc, err = sampleProc(cmd.Process.Pid); err != nil {
			return err
		}
		if w.srv, err = sampleProc(p.srv.pid()); err != nil {
			return err
		}
		if w.bench, err = sampleProc(os.Getpid()); err != nil {
			return err
		}
		if product {
			w.mem, err = scrapeMemCounters(ctx, metricsAddr)
		}
		return err
	}
	var first, end *window
	none := make(chan error, 1)
	none <- nil
	var profiled <-chan error = none
	ctx, cancel := context.WithTimeout(ctx, drainTimeout(n))
	defer cancel()
	// A window opens at the first floor read that moved, and closes at the
	// one that reached the last read.
	_, err = e.waitAcked(ctx, cons, last, 5*time.Millisecond, exited, func(floor uint64) error {
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
			profiled = p.profile(ctx, pprofAddr, round)
		}
		return nil
	})
	switch {
	case errors.Is(err, errEnded):
		return r, fmt.Errorf("%s exited before the backlog was acked (%v); stderr: %s", name, exitErr, stderr)
	case err != nil:
		return r, fmt.Errorf("drain: %w; stderr: %s", err, stderr)
	}
	r.From = "first ack"
	if first == nil {
		first, r.From = &begin, "start"
	}
	r.Startup, r.Window, r.WindowReads = first.at.Sub(begin.at), end.at.Sub(first.at), int(last-first.floor)
	reads := float64(r.WindowReads)
	r.ReadsPerSec = reads / r.Window.Seconds()
	r.StartToEnd = float64(n) / end.at.Sub(begin.at).Seconds()
	r.CPUMicros = float64((end.proc.cpu - first.proc.cpu).Microseconds()) / reads
	r.Syscalls = float64(end.proc.syscalls-first.proc.syscalls) / reads
	r.ServerCPUMicros = float64((end.srv.cpu - first.srv.cpu).Microseconds()) / reads
	r.ServerSyscalls = float64(end.srv.syscalls-first.srv.syscalls) / reads
	r.BenchCPUMicros = float64((end.bench.cpu - first.bench.cpu).Microseconds()) / reads
	if product {
		r.Mallocs = (end.mem.mallocs - first.mem.mallocs) / reads
		r.AllocBytes = (end.mem.bytes - first.mem.bytes) / reads
		r.GCPer1000 = 1000 * (end.mem.gcs - first.mem.gcs) / reads
	}
	if r.HWM, err = vmHWM(cmd.Process.Pid); err != nil {
		return r, err
	}
	if err := <-profiled; err != nil {
		return r, fmt.Errorf("profile: %w", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return r, fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-exited:
		err = exitErr
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("killed after 30s: %w", exitErr)
	}
	r.Exit = "exit status 0"
	if err != nil {
		r.Exit = err.Error()
	}
	r.Engine = tally.tally()
	if !product {
		var st BareStats
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &st); err != nil {
			return r, fmt.Errorf("bare consumer's stats line %q: %w; stderr: %s", stdout.String(), err, stderr)
		}
		if st.Window > 0 {
			r.Mallocs = float64(st.Mallocs) / float64(st.Window)
			r.AllocBytes = float64(st.Bytes) / float64(st.Window)
			r.GCPer1000 = 1000 * float64(st.NumGC) / float64(st.Window)
		}
	}
	return r, nil
}

// profile fetches a CPU profile of the product from its pprof server over
// the next ProcessProfileFor and writes it to <ProcessProfile>-<round>.pprof;
// the channel gets the outcome.
func (p processPass) profile(ctx context.Context, addr string, round int) <-chan error {
	done := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(p.cfg.ProcessProfileFor.Seconds()))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("%s: %s", url, resp.Status)
			return
		}
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(fmt.Sprintf("%s-%d.pprof", p.cfg.ProcessProfile, round+1), b, 0o644)
		}
		done <- err
	}()
	return done
}
