package dlqops

import (
	"errors"

	"github.com/meterline/meter-consumer/internal/jstool"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchStream: the dead-letter stream (or the source stream a
	// replay publishes to) does not exist (jstool.ErrNoSuchStream).
	ErrNoSuchStream = jstool.ErrNoSuchStream
	// ErrNoSuchSequence: no dead-letter copy is stored at that sequence.
	ErrNoSuchSequence = errors.New("no such sequence")
	// ErrNotConnected: the NATS connection is closed or the server did not
	// answer in time (jstool.ErrNotConnected).
	ErrNotConnected = jstool.ErrNotConnected
	// ErrInvalid: a filter, an option or a time flag that cannot be used.
	ErrInvalid = errors.New("invalid")
)
