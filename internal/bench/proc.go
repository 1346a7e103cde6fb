package bench

import (
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// vmHWM is pid's peak resident set (VmHWM of /proc/<pid>/status), in
// bytes.
func vmHWM(pid int) (int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("proc: %w", err)
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, fmt.Errorf("proc status: %w", err)
	}
	return int64(st.VmHWM), nil
}

// tail keeps the last max bytes written to it: a child's stderr, for errors.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	t.b = t.b[max(0, len(t.b)-t.max):]
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// cpuOf is pid's CPU time so far, utime + stime of every thread, from
// /proc/<pid>/stat.
func cpuOf(pid int) (time.Duration, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("proc: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("proc stat: %w", err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), nil
}

// child is a process the bench started, its output's end kept for errors.
type child struct {
	*exec.Cmd
	out    *tail
	exited chan struct{} // closed once err is Wait's
	err    error
}

// startChild starts cmd with its stderr, and its stdout unless set, in
// c.out.
func startChild(cmd *exec.Cmd) (*child, error) {
	c := &child{Cmd: cmd, out: &tail{max: 8 << 10}, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = c.out
	}
	cmd.Stderr = c.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// wait waits for the process to exit, and kills it after within.
func (c *child) wait(within time.Duration) error {
	select {
	case <-c.exited:
		return c.err
	case <-time.After(within):
		c.kill()
		return fmt.Errorf("killed after %s: %w", within, c.err)
	}
}

// kill kills the process if it still runs, and waits for it.
func (c *child) kill() {
	_ = c.Process.Kill()
	<-c.exited
}
