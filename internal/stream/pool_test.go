package stream

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A group's goroutines outlive their parent's end and end with stop, which
// waits for every one of them.
func TestGroupEndsWithStopNotWithItsParent(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(t.Context())
	var ended atomic.Int32
	g := start(parent, func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		ended.Add(1)
	}, func(ctx context.Context) {
		<-ctx.Done()
		ended.Add(1)
	})
	cancel()
	time.Sleep(20 * time.Millisecond)
	assert.Zero(t, ended.Load(), "the parent's end does not end the group")
	g.stop()
	assert.Equal(t, int32(2), ended.Load(), "stop waits for every goroutine")
}
