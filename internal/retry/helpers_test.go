package retry_test

import (
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// seededSchedule is what NewRand(20261130) gives under policy() for
// attempts 1..6. It is hard-coded so that any change to how delays are drawn
// fails the tests.
var seededSchedule = []time.Duration{
	347711532 * time.Nanosecond,   // attempt 1, band [0, 500ms]
	554888885 * time.Nanosecond,   // attempt 2, band [0, 1s]
	50267459 * time.Nanosecond,    // attempt 3, band [0, 2s]
	954707421 * time.Nanosecond,   // attempt 4, band [0, 4s]
	2013701458 * time.Nanosecond,  // attempt 5, band [0, 8s]
	14796792478 * time.Nanosecond, // attempt 6, band [0, 16s]
}

const seed = 20261130

// countingSource counts the draws taken from the wrapped source.
type countingSource struct {
	src   retry.Source
	draws int
}

func (c *countingSource) Int64N(n int64) int64 {
	c.draws++
	return c.src.Int64N(n)
}

// topSource always returns the largest value allowed, n-1.
type topSource struct{}

func (topSource) Int64N(n int64) int64 { return n - 1 }
