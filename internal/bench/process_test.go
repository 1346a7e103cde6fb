package bench_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/bench"
)

func TestBareConsumerNeedsItsFlags(t *testing.T) {
	err := bench.BareConsumer(t.Context(), []string{"--nats-url", "nats://127.0.0.1:1"}, os.Stdout)
	assert.ErrorContains(t, err, "are required")
}
