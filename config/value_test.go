package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{
		{0, "0s"},
		{500 * time.Millisecond, "500ms"},
		{30 * time.Second, "30s"},
		{90 * time.Second, "1m30s"},
		{5 * time.Minute, "5m"},
		{20 * time.Minute, "20m"},
		{time.Hour, "1h"},
		{time.Hour + time.Minute, "1h1m"},
		{time.Hour + time.Second, "1h0m1s"},
		{-time.Minute, "-1m"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := formatDuration(tt.give)
			assert.Equal(t, tt.want, got)
			back, err := time.ParseDuration(got)
			require.NoError(t, err)
			assert.Equal(t, tt.give, back)
		})
	}
}

func TestParseFormatRoundTrip(t *testing.T) {
	def := Default()
	for _, s := range settings {
		if s.field == nil {
			continue
		}
		t.Run(s.yaml, func(t *testing.T) {
			got := Config{}
			require.NoError(t, parseValue(s.field(&got), formatValue(s.field(&def))))
			assert.Equal(t, s.field(&def), s.field(&got))
		})
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		give string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"a", []string{"a"}},
		{"a, b ,,c", []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, splitList(tt.give))
		})
	}
}
