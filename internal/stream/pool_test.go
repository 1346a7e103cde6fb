package stream

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

// A group's goroutines outlive their parent's end and end with stop, which
// waits for every one of them. synctest.Wait is the synchronisation point:
// it returns once every goroutine of the group has done all it can, so what
// has not happened by then cannot happen later on its own.
func TestGroupEndsWithStopNotWithItsParent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(t.Context())
		release := make(chan struct{})
		var ended atomic.Int32
		g := start(parent, func(ctx context.Context) {
			<-ctx.Done()
			<-release // still busy when stop is called
			ended.Add(1)
		}, func(ctx context.Context) {
			<-ctx.Done()
			ended.Add(1)
		})

		cancel()
		synctest.Wait() // both goroutines wait on their context, or have ended
		assert.Zero(t, ended.Load(), "the parent's end does not end the group")

		stopped := make(chan struct{})
		go func() {
			g.stop()
			close(stopped)
		}()
		synctest.Wait() // the group's end is seen; the first goroutine waits on release
		assert.Equal(t, int32(1), ended.Load(), "stop ends the group's lifetime")
		select {
		case <-stopped:
			t.Error("stop returned while one of its goroutines still ran")
		default:
		}
		close(release)
		<-stopped
		assert.Equal(t, int32(2), ended.Load(), "stop waits for every goroutine")
	})
}
