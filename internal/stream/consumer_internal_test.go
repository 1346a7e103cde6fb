package stream

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/retry"
)

// The pipeline's settings have no defaults in this package (the binary's
// are package config's): New refuses a missing one by name instead of
// filling it in.
func TestNewRequiresTheBinarysSettings(t *testing.T) {
	view, err := engine.New(engine.Options{})
	require.NoError(t, err)
	valid := func() Options {
		return Options{
			Policy:      retry.Policy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 3},
			Concurrency: 4, AckWait: 5 * time.Second, HandlerTimeout: time.Second, ShutdownTimeout: time.Second,
			DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
			Sink:            downstream.Discard{}, DeadLetter: &fakeDeadLetter{}, Metrics: NewMetrics(prometheus.NewRegistry()),
			Rand: retry.NewRand(1), View: view,
		}
	}
	_, err = New(valid())
	require.NoError(t, err)
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"no engine view", func(o *Options) { o.View = nil }, "View"},
		{"no concurrency", func(o *Options) { o.Concurrency = 0 }, "Concurrency"},
		{"no ack wait", func(o *Options) { o.AckWait = 0 }, "AckWait"},
		{"no handler timeout", func(o *Options) { o.HandlerTimeout = 0 }, "HandlerTimeout"},
		{"no shutdown timeout", func(o *Options) { o.ShutdownTimeout = 0 }, "ShutdownTimeout"},
		{"no retry policy", func(o *Options) { o.Policy = retry.Policy{} }, "retry base"},
		{"no dead-letter retry", func(o *Options) { o.DeadLetterRetry = retry.Policy{} }, "DeadLetterRetry"},
		{"a dead-letter retry without attempts", func(o *Options) { o.DeadLetterRetry.MaxAttempts = 0 }, "DeadLetterRetry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			_, err := New(o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
