package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

// natsProc is a nats-server run as a child process of the bench, with
// JetStream storing in a temporary directory: the server of the process
// scenario, outside the bench's own process as a deployment's is.
type natsProc struct {
	*child
	dir, url, version string
}

// startNATSProc starts bin with JetStream on a free loopback port and waits
// until JetStream answers an account info request.
func startNATSProc(ctx context.Context, bin string) (*natsProc, error) {
	v, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", bin, err)
	}
	addr, err := natstest.Free()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meter-bench-nats-*")
	if err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	p := &natsProc{dir: dir, url: "nats://" + addr, version: strings.TrimSpace(string(v))}
	if p.child, err = startChild(exec.Command(bin, "-a", host, "-p", port, "-js", "-sd", dir)); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if nc, err := nats.Connect(p.url, nats.Timeout(time.Second)); err == nil {
			js, jerr := jetstream.New(nc)
			if jerr == nil {
				_, jerr = js.AccountInfo(ctx)
			}
			nc.Close()
			if jerr == nil {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return nil, errors.Join(fmt.Errorf("nats-server exited at start (%v): %s", p.err, p.out), p.close())
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("nats-server not ready in 10s: %s", p.out), p.close())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// close stops the server with SIGTERM (killed after 10s) and removes its
// store.
func (p *natsProc) close() error {
	_ = p.Process.Signal(syscall.SIGTERM)
	err := p.wait(10 * time.Second)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		err = nil // stopped by the signal it was sent
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

// BuildConsumer builds the consumer binary (cmd/consumer of the module the
// working directory is in) into dir as the Dockerfile does (static,
// trimmed), and returns its path: the process scenario's product.
func BuildConsumer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "consumer")
	return bin, proctest.GoBuild(ctx, bin, "./cmd/consumer", []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
}

// BuildNATSServer builds the nats-server of the module's go.mod
// (github.com/nats-io/nats-server/v2, a dependency, so from the module
// cache) into dir and returns its path: the process scenario's server.
func BuildNATSServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "nats-server")
	return bin, proctest.GoBuild(ctx, bin, "github.com/nats-io/nats-server/v2", []string{"CGO_ENABLED=0"}, "-trimpath")
}
