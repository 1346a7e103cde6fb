package jstool

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchStream: the stream Lookup was asked for does not exist, or
	// has no name.
	ErrNoSuchStream = errors.New("no such stream")
	// ErrNotConnected: the NATS connection is closed or the server did not
	// answer in time.
	ErrNotConnected = errors.New("not connected to NATS")
)

// Unreachable reports errors that mean the server cannot be reached: a
// closed connection, or a request nobody answered before its deadline.
func Unreachable(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, jetstream.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrNoServers) ||
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Wrap adds what was being done to err, and ErrNotConnected when err says
// the server cannot be reached (Unreachable).
func Wrap(what string, err error) error {
	if Unreachable(err) {
		return fmt.Errorf("%w: %s: %w", ErrNotConnected, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
