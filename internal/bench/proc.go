package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procStatus reads VmRSS and VmHWM of pid from /proc/<pid>/status, in bytes.
func procStatus(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("proc status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var to *int64
		switch string(name) {
		case "VmRSS":
			to = &rss
		case "VmHWM":
			to = &hwm
		default:
			continue
		}
		fields := bytes.Fields(rest) // "12345", "kB"
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, 0, fmt.Errorf("proc status: %s: unexpected %q", name, rest)
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc status: %s: %w", name, err)
		}
		*to = kb << 10
	}
	return rss, hwm, nil
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

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux architecture the bench runs on (getconf CLK_TCK).
const clockTicks = 100

// procSample is what /proc says of a process at one moment.
type procSample struct {
	cpu      time.Duration // utime + stime, every thread's
	syscalls int64         // read- and write-type system calls (syscr + syscw)
}

// sampleProc reads pid's CPU time from /proc/<pid>/stat and its read and
// write system calls from /proc/<pid>/io.
func sampleProc(pid int) (procSample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("proc stat: %w", err)
	}
	// The command name, field 2, is in parentheses and may hold anything:
	// the fields after its last ")" start at field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	fields := bytes.Fields(b[i+1:])
	if i < 0 || len(fields) < 13 {
		return procSample{}, fmt.Errorf("proc stat: unexpected %q", b)
	}
	var s procSample
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15
		t, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return procSample{}, fmt.Errorf("proc stat: %w", err)
		}
		s.cpu += time.Duration(t) * time.Second / clockTicks
	}
	if b, err = os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err != nil {
		return procSample{}, fmt.Errorf("proc io: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok || (name != "syscr" && name != "syscw") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return procSample{}, fmt.Errorf("proc io: %s: %w", name, err)
		}
		s.syscalls += n
	}
	return s, nil
}
