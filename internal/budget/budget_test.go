package budget_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/budget"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestRetriesAreATenthOfFirstAttemptsPlusAFloor(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
	b, err := budget.New(budget.Options{Ratio: 0.1, MinPerSecond: 0.5, Window: 10 * time.Second, Now: c.Now})
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
	c.now = c.now.Add(11 * time.Second)
	allowed = 0
	for range 500 {
		if b.Allow() {
			allowed++
		}
	}
	assert.Equal(t, 5, allowed, "a quiet replica keeps the floor")
}

func TestAQuietReplicaCanStillRetry(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
	b, err := budget.New(budget.Options{Now: c.Now})
	require.NoError(t, err)
	b.First()
	assert.True(t, b.Allow(), "defaults: 1/s over 10s")
}

func TestOptionsAreChecked(t *testing.T) {
	_, err := budget.New(budget.Options{Ratio: -1})
	assert.Error(t, err)
}
