package jstool

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// CheckConn fails fast, with ErrNotConnected, when there is no JetStream
// context or its connection is not up, instead of letting every request
// wait for its timeout.
func CheckConn(js jetstream.JetStream) error {
	if js == nil {
		return fmt.Errorf("%w: no JetStream context", ErrNotConnected)
	}
	if nc := js.Conn(); nc != nil && !nc.IsConnected() {
		return fmt.Errorf("%w: connection %s", ErrNotConnected, nc.Status())
	}
	return nil
}

// Lookup looks up stream name; its cached info is fresh. what says which
// stream it is ("dead-letter stream") and flag which flag names it
// ("--dlq-stream"): a stream without a name or not found is ErrNoSuchStream
// and says both, as in "dead-letter stream X: no such stream (is
// --dlq-stream right?)".
func Lookup(ctx context.Context, js jetstream.JetStream, name, what, flag string) (jetstream.Stream, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: %s: no name (set %s)", ErrNoSuchStream, what, flag)
	}
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%s %s: %w (is %s right?): %w", what, name, ErrNoSuchStream, flag, err)
	}
	if err != nil {
		return nil, Wrap(fmt.Sprintf("look up %s %s", what, name), err)
	}
	return st, nil
}
