package bench

import (
	"fmt"
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
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// procSample is what /proc says of a process at one moment.
type procSample struct {
	cpu      time.Duration // utime + stime, every thread's
	syscalls int64         // read- and write-type system calls (syscr + syscw)
}

// sampleProc reads pid's CPU time from /proc/<pid>/stat and its read and
// write system calls from /proc/<pid>/io.
func sampleProc(pid int) (procSample, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procSample{}, fmt.Errorf("proc: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return procSample{}, fmt.Errorf("proc stat: %w", err)
	}
	io, err := p.IO()
	if err != nil {
		return procSample{}, fmt.Errorf("proc io: %w", err)
	}
	return procSample{cpu: time.Duration(st.CPUTime() * float64(time.Second)), syscalls: int64(io.SyscR + io.SyscW)}, nil
}
