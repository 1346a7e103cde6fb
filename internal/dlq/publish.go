package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrPublish wraps every failure to store a dead-letter copy.
var ErrPublish = errors.New("dead-letter copy not confirmed")

// ErrRejected wraps (beside ErrPublish) a copy the server answered and
// refused: it will be refused the same way until someone changes the
// dead-letter stream (its limits, its subjects) or the copy. Retrying it at
// once is pointless; it needs a person.
var ErrRejected = errors.New("dead-letter copy rejected")

// ErrTooLarge wraps (beside ErrRejected) a copy that cannot be made to fit
// the size limit.
var ErrTooLarge = errors.New("dead-letter copy too large")

// JetStream is what a Publisher needs of a JetStream context: publishing,
// and reading the dead-letter stream to find a copy already stored.
type JetStream interface {
	jetstream.Publisher
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// Publisher publishes dead-letter copies and waits for JetStream's ack.
type Publisher struct {
	js JetStream
	o  PublisherOptions
}

// PublisherOptions configures a Publisher.
type PublisherOptions struct {
	Prefix string // subject prefix, e.g. "meter.dlq"
	Stream string // the dead-letter stream expected to store the copy
	// Timeout bounds one publish round trip; 0: no bound of its own, only
	// ctx's (the binary's is config's DLQ.PublishTimeout).
	Timeout time.Duration
	// MaxSize is the largest message, headers included, the server and the
	// dead-letter stream accept (the smaller of the connection's max
	// payload and the stream's max message size); a larger copy has its
	// payload truncated. 0: no limit.
	MaxSize int
	// Truncate allows a truncated copy. Set it only when the source stream
	// keeps a read after its TERM (limits retention), so that the full read
	// can still be found at Dlq-Sequence; otherwise an oversized copy is
	// rejected (ErrTooLarge) and the original is not let go.
	Truncate bool
	// Now is the clock for Dlq-Dead-Lettered-At (default time.Now).
	Now func() time.Time
}

// NewPublisher builds a Publisher.
func NewPublisher(js JetStream, o PublisherOptions) *Publisher {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Publisher{js: js, o: o}
}

// Publish stores the copy of e and returns nil only once JetStream confirmed
// it. A copy already stored under the same message id counts as confirmed.
func (p *Publisher) Publish(ctx context.Context, e Entry) error {
	// No Nats-Expected-Stream: the server would store it with the copy,
	// which keeps no Nats-Expected-* header; the stream that stored the
	// copy is checked on its acknowledgement instead (publish).
	msg := Build(p.o.Prefix, e, p.o.Now())
	truncated, err := Fit(msg, p.o.MaxSize)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w: %w", ErrPublish, ErrRejected, err)
	case truncated && !p.o.Truncate:
		return fmt.Errorf("%w: %w: %w: %d payload bytes do not fit in %d, and the source stream does not keep the read after it is terminated",
			ErrPublish, ErrRejected, ErrTooLarge, len(e.Data), p.o.MaxSize)
	}
	return p.publish(ctx, msg)
}

func (p *Publisher) publish(ctx context.Context, msg *nats.Msg) error {
	if p.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.o.Timeout)
		defer cancel()
	}
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		if rejected(err) {
			return fmt.Errorf("%w: %w: publish to %s: %w", ErrPublish, ErrRejected, msg.Subject, err)
		}
		return fmt.Errorf("%w: publish to %s: %w", ErrPublish, msg.Subject, err)
	}
	if p.o.Stream != "" && ack.Stream != p.o.Stream {
		return fmt.Errorf("%w: %w: stored in stream %q, want %q", ErrPublish, ErrRejected, ack.Stream, p.o.Stream)
	}
	return nil
}

// rejected reports an answer from the server that refuses the copy (an API
// error: too large, stream full, wrong stream, a header it will not take),
// as opposed to no answer (a timeout, no responders while a leader is
// elected, a lost connection), which may pass on its own.
func rejected(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) || errors.Is(err, nats.ErrMaxPayload)
}
