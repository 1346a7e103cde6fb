package topology_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the servers and connections the tests start.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
