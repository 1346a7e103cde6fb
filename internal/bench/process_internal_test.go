package bench

import (
	"io"
	"os"
	"testing"

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

// This process's /proc figures can be read, and they only grow.
func TestSampleProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc")
	}
	a, err := sampleProc(os.Getpid())
	require.NoError(t, err)
	for range 1000 {
		_, _ = os.ReadFile("/proc/self/stat")
	}
	b, err := sampleProc(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, b.cpu, a.cpu)
	assert.Greater(t, b.syscalls, a.syscalls, "1000 reads are syscalls")
}

func TestBareConsumerNeedsItsFlags(t *testing.T) {
	err := BareConsumer(t.Context(), []string{"--nats-url", "nats://127.0.0.1:1"}, io.Discard)
	assert.ErrorContains(t, err, "are required")
}
