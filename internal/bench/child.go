package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildConsumer builds the consumer binary (cmd/consumer of the module the
// working directory is in) into dir as the Dockerfile does (static,
// trimmed), and returns its path: the process scenario's product.
func BuildConsumer(ctx context.Context, dir string) (string, error) {
	return goBuild(ctx, filepath.Join(dir, "consumer"), "./cmd/consumer", "-ldflags=-s -w")
}

// BuildNATSServer builds the nats-server of the module's go.mod
// (github.com/nats-io/nats-server/v2, a dependency, so from the module
// cache) into dir and returns its path: the process scenario's server.
func BuildNATSServer(ctx context.Context, dir string) (string, error) {
	return goBuild(ctx, filepath.Join(dir, "nats-server"), "github.com/nats-io/nats-server/v2")
}

// goBuild builds pkg, static and trimmed, from the directory of the go.mod
// the working directory is in, into bin.
func goBuild(ctx context.Context, bin, pkg string, flags ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the meter-consumer module: run from its checkout")
	}
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-trimpath"}, flags...), "-o", bin, pkg)...)
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}
