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

// Publisher publishes dead-letter copies and waits for JetStream's ack.
type Publisher struct {
	js      jetstream.Publisher
	prefix  string
	stream  string
	timeout time.Duration
	now     func() time.Time
}

// PublisherOptions configures a Publisher.
type PublisherOptions struct {
	Prefix string // subject prefix, e.g. "meter.dlq"
	Stream string // the dead-letter stream expected to store the copy
	// Timeout bounds one publish round trip (default 5s).
	Timeout time.Duration
	// Now is the clock for Dlq-Dead-Lettered-At (default time.Now).
	Now func() time.Time
}

// NewPublisher builds a Publisher.
func NewPublisher(js jetstream.Publisher, o PublisherOptions) *Publisher {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Publisher{js: js, prefix: o.Prefix, stream: o.Stream, timeout: o.Timeout, now: o.Now}
}

// Publish stores the copy of e and returns nil only once JetStream confirmed
// it. A copy already stored under the same message id counts as confirmed.
func (p *Publisher) Publish(ctx context.Context, e Entry) error {
	msg := Build(p.prefix, e, p.now())
	return p.publish(ctx, msg)
}

func (p *Publisher) publish(ctx context.Context, msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var opts []jetstream.PublishOpt
	if p.stream != "" {
		opts = append(opts, jetstream.WithExpectStream(p.stream))
	}
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return fmt.Errorf("%w: publish to %s: %w", ErrPublish, msg.Subject, err)
	}
	if p.stream != "" && ack.Stream != p.stream {
		return fmt.Errorf("%w: stored in stream %q, want %q", ErrPublish, ack.Stream, p.stream)
	}
	return nil
}
