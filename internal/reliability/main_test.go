package reliability_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reliability-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "consumer")
	cmd := exec.Command("go", "build", "-o", binary, "../../cmd/consumer")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build consumer: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
