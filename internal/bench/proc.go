package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
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
