package audit

import (
	"errors"

	"github.com/meterline/meter-consumer/internal/jstool"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchStream: the source or the dead-letter stream does not exist
	// (jstool.ErrNoSuchStream).
	ErrNoSuchStream = jstool.ErrNoSuchStream
	// ErrNoSuchDurable: the durable consumer does not exist on the source
	// stream.
	ErrNoSuchDurable = errors.New("no such durable consumer")
	// ErrNotConnected: the NATS connection is closed or the server did not
	// answer in time (jstool.ErrNotConnected).
	ErrNotConnected = jstool.ErrNotConnected
	// ErrInvalid: a period, an option or an engine ledger that cannot be
	// used.
	ErrInvalid = errors.New("invalid")
)
