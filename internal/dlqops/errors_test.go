package dlqops_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlqops"
	"github.com/meterline/meter-consumer/internal/jstool"
)

// every runs each operation with o.
func every(o *dlqops.Ops) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"list":  func(ctx context.Context) error { return o.List(ctx, dlqops.Filter{}, false) },
		"show":  func(ctx context.Context) error { return o.Show(ctx, 1) },
		"stats": func(ctx context.Context) error { return o.Stats(ctx, dlqops.Filter{}, false) },
		"replay": func(ctx context.Context) error {
			_, err := o.Replay(ctx, dlqops.ReplayOptions{})
			return err
		},
		"purge": func(ctx context.Context) error {
			_, err := o.Purge(ctx, dlqops.Filter{}, "", func(int) bool { return true })
			return err
		},
	}
}

func TestNoSuchStream(t *testing.T) {
	e := newEnv(t, reads()...)
	e.ops.Stream = "NOPE"
	for name, op := range every(e.ops) {
		t.Run(name, func(t *testing.T) {
			err := op(t.Context())
			require.ErrorIs(t, err, jstool.ErrNoSuchStream)
			assert.ErrorIs(t, err, jetstream.ErrStreamNotFound)
			assert.Contains(t, err.Error(), "dead-letter stream NOPE")
			assert.Contains(t, err.Error(), "--dlq-stream")
		})
	}
}

func TestReplayNoSuchSourceStream(t *testing.T) {
	e := newEnv(t, reads()...)
	e.ops.SourceStream = "NOPE"
	_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.ErrorIs(t, err, jstool.ErrNoSuchStream)
	assert.Contains(t, err.Error(), "source stream NOPE")
	assert.Contains(t, err.Error(), "--stream")
	assert.Len(t, e.copies(), 5, "nothing was touched")

	_, err = e.ops.Replay(t.Context(), dlqops.ReplayOptions{DryRun: true})
	assert.NoError(t, err, "a dry run publishes nothing")
}

func TestNotConnected(t *testing.T) {
	e := newEnv(t, reads()...)
	e.nc.Close()
	for name, op := range every(e.ops) {
		t.Run(name, func(t *testing.T) {
			err := op(t.Context())
			require.ErrorIs(t, err, jstool.ErrNotConnected)
			assert.Contains(t, err.Error(), "not connected to NATS")
		})
	}
	o := &dlqops.Ops{Stream: dlqName}
	assert.ErrorIs(t, o.List(t.Context(), dlqops.Filter{}, false), jstool.ErrNotConnected, "no JetStream at all")
}

// TestServerGoneMidReplay: the connection drops during a replay. The
// replay stops with ErrNotConnected instead of failing every read.
func TestServerGoneMidReplay(t *testing.T) {
	e := newEnv(t, reads()...)
	e.clock.onSleep = func(n int) error {
		if n == 2 {
			e.nc.Close()
		}
		return nil
	}
	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{})
	require.ErrorIs(t, err, jstool.ErrNotConnected)
	assert.ErrorIs(t, err, nats.ErrConnectionClosed)
	assert.Equal(t, 2, sum.Replayed)
	assert.LessOrEqual(t, sum.Failed, 1)
}
