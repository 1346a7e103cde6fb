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
	b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second, Clock: c})
	require.NoError(t, err)
	b.First()
	assert.True(t, b.Allow(), "1/s over 10s")
}

// A MinPerSecond of 0 is no floor, not a default: with no first attempts
// there is no retry.
func TestNoFloorIsNoFloor(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
	b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 0, Window: 10 * time.Second, Clock: c})
	require.NoError(t, err)
	b.First()
	assert.False(t, b.Allow(), "0.1 x 1 first attempt is less than one retry")
}

// The budget has no defaults of its own (they are the binary's, in package
// config): a missing option is refused by name, not filled in.
func TestOptionsAreChecked(t *testing.T) {
	valid := budget.Options{Ratio: 0.1, MinPerSecond: 5, Window: 10 * time.Second}
	tests := []struct {
		name   string
		mutate func(*budget.Options)
		want   string
	}{
		{"no ratio", func(o *budget.Options) { o.Ratio = 0 }, "Ratio"},
		{"negative ratio", func(o *budget.Options) { o.Ratio = -1 }, "Ratio"},
		{"negative floor", func(o *budget.Options) { o.MinPerSecond = -1 }, "MinPerSecond"},
		{"no window", func(o *budget.Options) { o.Window = 0 }, "Window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.mutate(&o)
			_, err := budget.New(o)
			require.ErrorIs(t, err, budget.ErrOption)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
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
