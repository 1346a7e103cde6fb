package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Rate is how fast a variant got through its reads, and the process CPU it
// took (user + system, getrusage RUSAGE_SELF: the in-process NATS server, the
// loopback rate engine and the control polling are counted too).
type Rate struct {
	MsgsPerSec float64   `json:"msgs_per_sec"`
	CPUMicros  float64   `json:"cpu_us_per_msg"`
	Runs       []float64 `json:"runs_msgs_per_sec"`
	// Stall is the longest time the ack floor did not move in any run
	// (measured when the durable's ack floor is polled).
	Stall time.Duration `json:"longest_stall_ns"`
}

// run is one measured pass over n reads.
type run struct {
	n       int
	elapsed time.Duration
	cpu     time.Duration
	stall   time.Duration // longest time the ack floor did not move
}

func (r run) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// best keeps the fastest of several runs, and every run's rate.
func best(runs []run) Rate {
	var out Rate
	var top run
	for _, r := range runs {
		out.Runs = append(out.Runs, r.rate())
		out.Stall = max(out.Stall, r.stall)
		if top.n == 0 || r.rate() > top.rate() {
			top = r
		}
	}
	if top.n > 0 {
		out.MsgsPerSec = top.rate()
		out.CPUMicros = float64(top.cpu.Nanoseconds()) / float64(top.n) / 1e3
	}
	return out
}

// timeRun measures f after a collection, so garbage from an earlier run is
// not charged to this one.
func timeRun(n int, f func() error) (run, error) {
	runtime.GC()
	cpu0, t0 := processCPU(), time.Now()
	err := f()
	return run{n: n, elapsed: time.Since(t0), cpu: processCPU() - cpu0}, err
}

// drainTimeout bounds one pass over n reads: generous, so only a hang trips it.
func drainTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n)*200*time.Microsecond
}

// drain measures start's variant over the backlog up to last (n reads) on a
// fresh durable, from start until the durable's ack floor reaches last.
func (e *env) drain(ctx context.Context, durable string, maxAckPending, n int, last uint64, start starter) (run, error) {
	cons, err := e.durable(ctx, durable, maxAckPending)
	if err != nil {
		return run{}, err
	}
	defer e.drop(context.WithoutCancel(ctx), durable)
	ctx, cancel := context.WithTimeout(ctx, drainTimeout(n))
	defer cancel()
	var r *running
	var stall time.Duration
	res, err := timeRun(n, func() error {
		var err error
		if r, err = start(ctx, durable); err != nil {
			return err
		}
		stall, err = e.waitAcked(ctx, cons, last, 5*time.Millisecond, r.ended, nil)
		return err
	})
	res.stall = stall
	if r != nil {
		if serr := r.stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop: %w", serr))
		}
	}
	if err != nil {
		return run{}, fmt.Errorf("%s: %w", durable, err)
	}
	return res, nil
}
