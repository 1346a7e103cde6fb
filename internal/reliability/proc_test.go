package reliability_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proc is one consumer process with JSON logs.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
}

// fast are the flags every scenario starts from: short delays so a test
// runs in seconds, debug logs so a test can count what each process did.
var fast = []string{
	"--log-format", "json", "--log-level", "debug", "--http-addr", "",
	"--retry-base", "50ms", "--retry-cap", "400ms", "--max-attempts", "6",
	"--ack-wait", "3s", "--handler-timeout", "2s", "--downstream-timeout", "1500ms",
	"--shutdown-timeout", "5s",
}

func startConsumer(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startConsumerEnv(t, name, nil, args...)
}

// startConsumerEnv starts a consumer with extra environment variables.
func startConsumerEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binary, append(append([]string{}, fast...), args...)...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			_ = json.Unmarshal(sc.Bytes(), &m)
			p.mu.Lock()
			p.lines = append(p.lines, m)
			p.raw.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s output (last 4000 bytes):\n%s", p.name, tail(p.output(), 4000))
			if dir := os.Getenv("RELIABILITY_LOGS"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, t.Name()+"-"+p.name+".log"), []byte(p.output()), 0o644)
			}
		}
	})
	require.Eventually(t, func() bool { return p.count("consuming") > 0 || p.exited() }, 30*time.Second, 10*time.Millisecond)
	require.False(t, p.exited(), "%s exited at start:\n%s", name, p.output())
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// count returns how many log records have msg.
func (p *proc) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if l != nil && l["msg"] == msg {
			n++
		}
	}
	return n
}

// kill sends SIGKILL.
func (p *proc) kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// term sends SIGTERM and returns the exit code and how long the exit took.
func (p *proc) term(within time.Duration) (int, time.Duration) {
	p.t.Helper()
	began := time.Now()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("%s did not exit within %s of SIGTERM", p.name, within)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(began)
}
