package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// childMemory publishes the backlog, then runs the consumer binary on the
// production durable until it has acked all of it, sampling its RSS.
func childMemory(ctx context.Context, e *env, cfg Config) (ChildMemory, error) {
	out := ChildMemory{N: cfg.MemoryN}
	if err := e.reset(ctx); err != nil {
		return out, err
	}
	cons, err := e.durable(ctx, e.topo.Durable, 0)
	if err != nil {
		return out, err
	}
	var re *rateEngine
	labelled(ctx, sideDownstream, func(context.Context) { re, err = startRateEngine(nil) })
	if err != nil {
		return out, err
	}
	defer re.close()
	t0 := time.Now()
	var last uint64
	labelled(ctx, sidePublisher, func(ctx context.Context) { last, err = publishBacklog(ctx, e.js, 0, cfg.MemoryN) })
	if err != nil {
		return out, err
	}
	out.Publish = time.Since(t0)

	stderr := &tail{max: 8 << 10}
	cmd := exec.Command(cfg.Binary, "--nats-url", e.url, "--downstream-url", re.URL,
		"--http-addr", "", "--log-format", "json", "--log-level", "warn")
	cmd.Env = append(os.Environ(), cfg.BinaryEnv...)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("start %s: %w", cfg.Binary, err)
	}
	exited := make(chan error, 1)
	var waited sync.Once
	go func() { exited <- cmd.Wait() }()
	wait := func(d time.Duration) error {
		var werr error = errors.New("not waited")
		waited.Do(func() {
			select {
			case werr = <-exited:
			case <-time.After(d):
				_ = cmd.Process.Kill()
				werr = fmt.Errorf("killed after %s: %w", d, <-exited)
			}
		})
		return werr
	}
	defer func() { _ = cmd.Process.Kill(); _ = wait(5 * time.Second) }()

	ctx, cancel := context.WithTimeout(ctx, drainTimeout(cfg.MemoryN)+time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var floor uint64
	moved := time.Now()
	for {
		if rss, _, err := procStatus(cmd.Process.Pid); err == nil {
			out.PeakRSS = max(out.PeakRSS, rss)
			if out.FirstRSS == 0 && rss > 0 {
				out.FirstRSS = rss
			}
		}
		info, err := infoWithin(ctx, cons, infoTimeout)
		if err == nil && info.AckFloor.Stream != floor {
			floor, moved = info.AckFloor.Stream, time.Now()
		}
		out.Stall = max(out.Stall, time.Since(moved))
		if floor >= last {
			break
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("drain: %w; stderr: %s", ctx.Err(), stderr)
		case err := <-exited:
			exited <- err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return out, fmt.Errorf("consumer exited before the backlog was acked: %w; stderr: %s", err, stderr)
		case <-tick.C:
		}
	}
	out.Drain = time.Since(t0)
	out.MsgsPerSec = float64(cfg.MemoryN) / out.Drain.Seconds()
	if _, out.HWM, err = procStatus(cmd.Process.Pid); err != nil {
		return out, err
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return out, fmt.Errorf("SIGTERM: %w", err)
	}
	out.Exit = "exit status 0"
	if err := wait(30 * time.Second); err != nil {
		out.Exit = err.Error()
	}
	return out, nil
}

// BuildConsumer builds the consumer binary (cmd/consumer of the module the
// working directory is in) into dir as the Dockerfile does (static,
// trimmed), and returns its path: the memory scenario's child.
func BuildConsumer(ctx context.Context, dir string) (string, error) {
	mod, err := moduleDir(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "consumer")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/consumer")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/consumer: %w\n%s", err, out)
	}
	return bin, nil
}
