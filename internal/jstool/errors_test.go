package jstool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/jstool"
)

func TestWrap(t *testing.T) {
	tests := []struct {
		err          error
		notConnected bool
	}{
		{nats.ErrConnectionClosed, true},
		{jetstream.ErrConnectionClosed, true},
		{fmt.Errorf("request: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{nats.ErrNoServers, true},
		{context.Canceled, false},
		{jetstream.ErrStreamNotFound, false},
		{errors.New("boom"), false},
	}
	for _, tt := range tests {
		err := jstool.Wrap("look up stream S", tt.err)
		assert.ErrorIs(t, err, tt.err)
		assert.Equal(t, tt.notConnected, errors.Is(err, jstool.ErrNotConnected), "%v", tt.err)
		assert.Equal(t, tt.notConnected, jstool.Unreachable(tt.err), "%v", tt.err)
		assert.Contains(t, err.Error(), "look up stream S: ")
	}
}
