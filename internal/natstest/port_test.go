package natstest_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// A free port is one a test can listen on.
func TestFreePortCanBeListenedOn(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:" + strconv.Itoa(natstest.FreePort(t)), natstest.FreeAddr(t)} {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		require.NoError(t, ln.Close())
	}
}
