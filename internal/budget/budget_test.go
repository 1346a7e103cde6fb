package budget_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/clock"
)

func TestRetriesAreATenthOfFirstAttemptsPlusAFloor(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
	b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 0.5, Window: 10 * time.Second, Clock: c})
	require.NoError(t, err)
	for range 1000 {
		b.First()
	}
	allowed := 0
	for range 500 {
		if b.Allow() {
			allowed++
		}
	}
	assert.Equal(t, 105, allowed, "10% of 1000 first attempts, plus 0.5/s over 10s")

	// Past the window the first attempts are forgotten; the floor stays.
	c.Advance(11 * time.Second)
	allowed = 0
	for range 500 {
		if b.Allow() {
			allowed++
		}
	}
	assert.Equal(t, 5, allowed, "a quiet replica keeps the floor")
}

func TestAQuietReplicaCanStillRetry(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
	b, err := budget.New(budget.Options{Clock: c})
	require.NoError(t, err)
	b.First()
	assert.True(t, b.Allow(), "defaults: 1/s over 10s")
}

func TestOptionsAreChecked(t *testing.T) {
	_, err := budget.New(budget.Options{Ratio: -1})
	assert.Error(t, err)
}

// TestAWallClockStepForgetsNothingAndKeepsNothingStale: the window runs on
// the monotonic clock. On the wall clock, a step back kept the first
// attempts of the slots before it counted until the wall clock caught up:
// a replica that was busy a minute ago kept its larger budget.
func TestAWallClockStepForgetsNothingAndKeepsNothingStale(t *testing.T) {
	tests := []struct {
		name string
		step time.Duration
	}{
		{"no step", 0},
		{"back a minute", -time.Minute},
		{"forward a minute", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
			b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 0.5, Window: 10 * time.Second, Clock: c})
			require.NoError(t, err)
			for range 10 {
				for range 100 {
					b.First()
				}
				c.Advance(time.Second)
			}
			c.Step(tt.step)
			c.Advance(11 * time.Second)
			allowed := 0
			for range 500 {
				if b.Allow() {
					allowed++
				}
			}
			assert.Equal(t, 5, allowed, "past the window only the floor is left")
		})
	}
}
