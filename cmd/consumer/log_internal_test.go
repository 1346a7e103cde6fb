package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

func TestLogDurationsAsText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format string
		want   string // what the record holds for delay
	}{
		{"json", `"delay":"1.5s"`},
		{"text", `delay=1.5s`},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(config.Log{Format: tt.format, Level: "info"}, &buf)
			require.NoError(t, err)
			log.Warn("nak", slog.Duration("delay", 1500*time.Millisecond))
			assert.Contains(t, buf.String(), tt.want)
		})
	}
}

func TestJSONLogDurationsEverywhere(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := newLogger(config.Log{Format: "json", Level: "info"}, &buf)
	require.NoError(t, err)
	log.With(slog.Duration("ack_wait", 30*time.Second)).Info("x",
		slog.Any("wait", 5*time.Minute),
		slog.Group("retry", slog.Duration("base", 500*time.Millisecond)),
		slog.Int64("n", 7))
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, "30s", rec["ack_wait"], "an attribute added with With")
	assert.Equal(t, "5m0s", rec["wait"], "slog.Any of a duration")
	assert.Equal(t, map[string]any{"base": "500ms"}, rec["retry"], "inside a group")
	assert.InDelta(t, 7, rec["n"], 0, "other numbers stay numbers")
	d, err := time.ParseDuration(rec["wait"].(string))
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, d, "reads back as a duration")
}
