package dlqops

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSubjectMatch(t *testing.T) {
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{"meter.reads.north", "meter.reads.north", true},
		{"meter.reads.north", "meter.reads.south", false},
		{"meter.reads.north", "meter.reads.north.x", false},
		{"meter.reads.*", "meter.reads.north", true},
		{"meter.reads.*", "meter.reads", false},
		{"meter.reads.*", "meter.reads.north.x", false},
		{"meter.*.north", "meter.reads.north", true},
		{"meter.reads.>", "meter.reads.north.x", true},
		{"meter.reads.>", "meter.reads", false},
		{">", "meter", true},
		{"*", "meter.reads", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.subject, func(t *testing.T) {
			assert.True(t, validPattern(tt.pattern))
			assert.Equal(t, tt.want, subjectMatch(tt.pattern, tt.subject))
		})
	}
}

func TestAge(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{45*time.Second + 900*time.Millisecond, "45s"},
		{12*time.Minute + 59*time.Second, "12m"},
		{3*time.Hour + 12*time.Minute, "3h12m"},
		{52 * time.Hour, "2d4h"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, age(tt.give), "%v", tt.give)
	}
}

func TestFirstLine(t *testing.T) {
	assert.Equal(t, "boom", firstLine("boom\nstack", 60))
	assert.Equal(t, "ab...", firstLine("abcdefgh", 5))
}

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
