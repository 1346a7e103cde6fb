package reliability_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/meterline/meter-consumer/internal/proctest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reliability-bin")
	if err != nil {
		panic(err)
	}
	binary, err = proctest.Build(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
