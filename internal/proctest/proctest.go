package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds the consumer binary into dir and returns its path; race
// builds it with the race detector.
func Build(dir string, race bool) (string, error) {
	var flags []string
	if race {
		flags = append(flags, "-race")
	}
	bin := filepath.Join(dir, "consumer")
	return bin, GoBuild(context.Background(), bin, "./cmd/consumer", nil, flags...)
}

// GoBuild builds pkg, from the directory of the go.mod the working
// directory is in, into bin with the go command's flags, env added to its
// environment: the tests' binaries and the bench's alike.
func GoBuild(ctx context.Context, bin, pkg string, env []string, flags ...string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return errors.New("not inside the meter-consumer module: run from its checkout")
	}
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", bin, pkg)...)
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// Main builds the binary into a temporary directory, stores its path in
// binary, runs the tests and exits: a TestMain in one call.
func Main(m *testing.M, race bool, binary *string) {
	dir, err := os.MkdirTemp("", "consumer-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary, err = Build(dir, race)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Proc is one consumer process whose stderr carries JSON log records.
type Proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
}

// Start runs binary with args and env (PATH is always passed) until the
// test ends. A data race the binary reports (built with -race) fails the
// test. On failure the output is logged, and written whole to
// $RELIABILITY_LOGS/<test>-<name>.log when that is set.
func Start(t testing.TB, name, binary string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", name, err)
	}
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
		if i := strings.Index(p.Output(), "WARNING: DATA RACE"); i >= 0 {
			t.Errorf("%s (built with -race) found a data race:\n%s", name, p.Output()[i:min(len(p.Output()), i+6000)])
		}
		if t.Failed() {
			out := p.Output()
			t.Logf("%s output (last 4000 bytes):\n%s", name, out[max(0, len(out)-4000):])
			if dir := os.Getenv("RELIABILITY_LOGS"); dir != "" {
				file := strings.ReplaceAll(t.Name(), "/", "_") + "-" + name + ".log"
				_ = os.WriteFile(filepath.Join(dir, file), []byte(out), 0o644)
			}
		}
	})
	return p
}

// Output returns everything the process wrote to stderr so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Count returns how many log records have msg.
func (p *Proc) Count(msg string) int {
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

// Records returns every log record with msg, in order.
func (p *Proc) Records(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if l != nil && l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// First returns the first log record with msg, or nil.
func (p *Proc) First(msg string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l != nil && l["msg"] == msg {
			return l
		}
	}
	return nil
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the end.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Term sends SIGTERM and returns the exit code and how long the exit took;
// it fails the test if the process is still running after within.
func (p *Proc) Term(within time.Duration) (int, time.Duration) {
	p.t.Helper()
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("proctest: SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("proctest: %s did not exit within %s of SIGTERM", p.name, within)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(began)
}
