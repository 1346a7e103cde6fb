package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildConsumer builds the consumer binary (cmd/consumer of the module the
// working directory is in) into dir as the Dockerfile does (static,
// trimmed), and returns its path: the process scenario's product.
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
