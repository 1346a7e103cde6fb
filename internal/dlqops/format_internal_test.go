package dlqops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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
