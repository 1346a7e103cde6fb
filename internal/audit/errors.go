package audit

import "errors"

// Sentinel errors, matched with errors.Is; a stream missing or NATS out of
// reach is jstool.ErrNoSuchStream or jstool.ErrNotConnected.
var (
	// ErrNoSuchDurable: the durable consumer does not exist on the source
	// stream.
	ErrNoSuchDurable = errors.New("no such durable consumer")
	// ErrInvalid: a period, an option or an engine ledger that cannot be
	// used.
	ErrInvalid = errors.New("invalid")
)
