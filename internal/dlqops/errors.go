package dlqops

import "errors"

// Sentinel errors, matched with errors.Is; a stream missing or NATS out of
// reach is jstool.ErrNoSuchStream or jstool.ErrNotConnected.
var (
	// ErrNoSuchSequence: no dead-letter copy is stored at that sequence.
	ErrNoSuchSequence = errors.New("no such sequence")
	// ErrInvalid: a filter, an option or a time flag that cannot be used.
	ErrInvalid = errors.New("invalid")
	// ErrWrongStream: the original subject of a copy to replay is not one
	// the source stream takes.
	ErrWrongStream = errors.New("not a subject of the source stream")
)
