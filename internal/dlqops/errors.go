package dlqops

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchStream: the dead-letter stream (or the source stream a
	// replay publishes to) does not exist.
	ErrNoSuchStream = errors.New("no such stream")
	// ErrNoSuchSequence: no dead-letter copy is stored at that sequence.
	ErrNoSuchSequence = errors.New("no such sequence")
	// ErrNotConnected: the NATS connection is closed or the server did not
	// answer in time.
	ErrNotConnected = errors.New("not connected to NATS")
	// ErrInvalid: a filter, an option or a time flag that cannot be used.
	ErrInvalid = errors.New("invalid")
)

// notConnected reports errors that mean the server cannot be reached: a
// closed connection, or a request nobody answered before its deadline.
func notConnected(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, jetstream.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrNoServers) ||
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded)
}

// wrapNATS adds what was being done to err, and ErrNotConnected when err
// says the server cannot be reached.
func wrapNATS(what string, err error) error {
	if notConnected(err) {
		return fmt.Errorf("%w: %s: %w", ErrNotConnected, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
