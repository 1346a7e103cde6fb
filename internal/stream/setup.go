package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Topology names the streams and the durable consumer the service uses.
type Topology struct {
	Stream   string   // source stream, e.g. METER_READS
	Subjects []string // its subjects, e.g. meter.reads.>
	Durable  string   // the shared durable pull consumer, e.g. meter-consumer

	DLQStream     string        // dead-letter stream, e.g. METER_READS_DLQ
	DLQPrefix     string        // dead-letter subject prefix, e.g. meter.dlq
	DLQDuplicates time.Duration // dead-letter duplicate window (>= 10m)

	Replicas      int           // stream and consumer replicas when created
	AckWait       time.Duration // consumer AckWait
	MaxAckPending int           // consumer MaxAckPending
}

// ErrMissing wraps a stream or consumer that does not exist while the service
// was not asked to create it.
var ErrMissing = errors.New("missing")

// DefaultDLQDuplicates is the dead-letter duplicate window.
const DefaultDLQDuplicates = 20 * time.Minute

// ConsumerConfig is the durable consumer's configuration: explicit ack, no
// MaxDeliver (the service decides when a read is exhausted) and no BackOff
// (it has no jitter and would inflate every NAK delay).
func (t Topology) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       t.Durable,
		Description:   "meter reads, settled by meter-consumer",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       t.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: t.MaxAckPending,
		Replicas:      t.Replicas,
	}
}

// StreamConfig is the source stream's configuration.
func (t Topology) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        t.Stream,
		Description: "meter reads from head-ends",
		Subjects:    t.Subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    max(t.Replicas, 1),
		Duplicates:  10 * time.Minute, // also guards dead-letter replays (replay:<dlq>:<seq>)
	}
}

// DLQStreamConfig is the dead-letter stream's configuration.
func (t Topology) DLQStreamConfig() jetstream.StreamConfig {
	dup := t.DLQDuplicates
	if dup < 10*time.Minute {
		dup = DefaultDLQDuplicates
	}
	return jetstream.StreamConfig{
		Name:        t.DLQStream,
		Description: "dead-lettered meter reads, with their provenance in Dlq-* headers",
		Subjects:    []string{t.DLQPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    max(t.Replicas, 1),
		Duplicates:  dup,
	}
}

// Ensure creates or updates both streams and the durable consumer.
func Ensure(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.Consumer, error) {
	if _, err := js.CreateOrUpdateStream(ctx, t.StreamConfig()); err != nil {
		return nil, fmt.Errorf("create stream %s: %w", t.Stream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, t.DLQStreamConfig()); err != nil {
		return nil, fmt.Errorf("create dead-letter stream %s: %w", t.DLQStream, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, t.Stream, t.ConsumerConfig())
	if err != nil {
		return nil, fmt.Errorf("create consumer %s on stream %s: %w", t.Durable, t.Stream, err)
	}
	return cons, nil
}

// Lookup requires both streams and the consumer to exist and says which is
// missing.
func Lookup(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.Consumer, error) {
	if _, err := js.Stream(ctx, t.Stream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("stream %s: %w (create it, or start with --create-streams): %w", t.Stream, ErrMissing, err)
		}
		return nil, fmt.Errorf("look up stream %s: %w", t.Stream, err)
	}
	if _, err := js.Stream(ctx, t.DLQStream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("dead-letter stream %s: %w (create it, or start with --create-streams): %w", t.DLQStream, ErrMissing, err)
		}
		return nil, fmt.Errorf("look up dead-letter stream %s: %w", t.DLQStream, err)
	}
	cons, err := js.Consumer(ctx, t.Stream, t.Durable)
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("consumer %s on stream %s: %w (create it, or start with --create-streams): %w", t.Durable, t.Stream, ErrMissing, err)
		}
		return nil, fmt.Errorf("look up consumer %s on stream %s: %w", t.Durable, t.Stream, err)
	}
	return cons, nil
}
