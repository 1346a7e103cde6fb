package dlqops

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPacer(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	var slept []time.Duration
	p := newPacer(4, func() time.Time { return now }, func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		now = now.Add(d)
		return nil
	})
	for range 3 {
		assert.NoError(t, p.wait(t.Context()))
	}
	assert.Equal(t, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}, slept)

	// Work slower than the rate: no waiting, and no burst afterwards.
	slept = nil
	now = now.Add(time.Second)
	assert.NoError(t, p.wait(t.Context()))
	now = now.Add(100 * time.Millisecond)
	assert.NoError(t, p.wait(t.Context()))
	assert.Equal(t, []time.Duration{150 * time.Millisecond}, slept)
}
