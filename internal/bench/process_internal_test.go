package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/meter"
)

// The process scenario's reads are valid reads of 300 bytes with the key
// the product derives.
func TestProcessBodyIsAValidReadOf300Bytes(t *testing.T) {
	for _, i := range []int{0, 42, 123456, 9999999} {
		b := processBody(i)
		assert.Len(t, b, processBodySize, string(b))
		r, err := meter.Decode(b)
		require.NoError(t, err, string(b))
		assert.Equal(t, Key(i), r.IdempotencyKey)
	}
}

func TestSpanOf(t *testing.T) {
	assert.Equal(t, Span{}, spanOf(nil))
	assert.Equal(t, Span{Median: 2, Min: 1, Max: 5}, spanOf([]float64{5, 1, 2}))
	assert.Equal(t, Span{Median: 2.5, Min: 1, Max: 4}, spanOf([]float64{4, 1, 2, 3}))
}

// This process's CPU time can be read from /proc, and it grows with work.
func TestCPUOf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	a, err := cpuOf(os.Getpid())
	require.NoError(t, err)
	// Work until the kernel's next tick counts it (ticks are 10ms or
	// coarser): on a busy machine a fixed span of work may fall between two.
	b := a
	for start := time.Now(); b <= a && time.Since(start) < 10*time.Second; {
		_, _ = os.ReadFile("/proc/self/stat")
		b, err = cpuOf(os.Getpid())
		require.NoError(t, err)
	}
	assert.Greater(t, b, a, "work is CPU time")
}

func TestBareConsumerNeedsItsFlags(t *testing.T) {
	err := BareConsumer(t.Context(), []string{"--nats-url", "nats://127.0.0.1:1"})
	assert.ErrorContains(t, err, "are required")
}
