package stream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the consumers, the servers or the downstreams the
// tests start.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
