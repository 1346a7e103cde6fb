package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchStream: the source or the dead-letter stream does not exist.
	ErrNoSuchStream = errors.New("no such stream")
	// ErrNoSuchDurable: the durable consumer does not exist on the source
	// stream.
	ErrNoSuchDurable = errors.New("no such durable consumer")
	// ErrNotConnected: the NATS connection is closed or the server did not
	// answer in time.
	ErrNotConnected = errors.New("not connected to NATS")
	// ErrInvalid: a period, an option or an engine ledger that cannot be
	// used.
	ErrInvalid = errors.New("invalid")
)

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
