package stream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Topology names the streams, the durable consumer and the records bucket
// the service uses, and the settings it gives them when it creates them.
type Topology struct {
	Stream   string        // source stream, e.g. METER_READS
	Subjects []string      // the subjects consumed, e.g. meter.reads.>
	MaxAge   time.Duration // a created source stream's max age (0: none)
	MaxBytes int64         // a created source stream's max bytes (<= 0: none)
	Durable  string        // the shared durable pull consumer, e.g. meter-consumer

	DLQStream     string        // dead-letter stream, e.g. METER_READS_DLQ
	DLQPrefix     string        // dead-letter subject prefix, e.g. meter.dlq
	DLQDuplicates time.Duration // dead-letter duplicate window (>= 10m)
	DLQMaxBytes   int64         // a created dead-letter stream's max bytes (<= 0: none)

	// RecordsBucket is the key-value bucket of the reads' records (see
	// Record); "" derives it from the stream and the durable.
	RecordsBucket string

	Replicas      int           // stream and consumer replicas when created
	AckWait       time.Duration // consumer AckWait
	MaxAckPending int           // consumer MaxAckPending

	// Reconcile updates an existing durable, stream or bucket whose
	// settings differ from these, instead of refusing to start (durable) or
	// warning (streams).
	Reconcile bool
}

// ErrMissing wraps a stream, consumer or bucket that does not exist while
// the service was not asked to create it.
var ErrMissing = errors.New("missing")

// ErrMismatch wraps an existing durable whose settings the service cannot
// run on, while it was not asked to reconcile them.
var ErrMismatch = errors.New("settings the service cannot run on")

// DefaultDLQDuplicates is the dead-letter duplicate window.
const DefaultDLQDuplicates = 20 * time.Minute

// Setup is what the server holds for the service, as found (or made) at
// start: the consumer, the records, and the settings the pipeline must
// follow because they are the server's, not the configuration's.
type Setup struct {
	Consumer jetstream.Consumer
	Records  KVRecords
	// AckWait and MaxAckPending are the durable's own.
	AckWait       time.Duration
	MaxAckPending int
	// DeadLetterWindow is the dead-letter stream's duplicate window.
	DeadLetterWindow time.Duration
	// MaxCopySize is the dead-letter stream's largest message (0: the
	// server's max payload alone bounds it).
	MaxCopySize int
	// KeepsReads: the source stream keeps a read after its TERM (limits
	// retention), so a truncated copy can point at the full read.
	KeepsReads bool
	// Warnings are differences between existing streams and the settings
	// the service would have created them with; log each once.
	Warnings []string
}

var bucketChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// Bucket returns the records bucket's name.
func (t Topology) Bucket() string {
	if t.RecordsBucket != "" {
		return t.RecordsBucket
	}
	return bucketChars.ReplaceAllString(t.Stream+"_"+t.Durable, "_") + "_records"
}

// ConsumerConfig is the durable consumer's configuration: explicit ack, no
// MaxDeliver (the service decides when a read is exhausted), no BackOff (it
// has no jitter and would inflate every NAK delay), and the consumed
// subjects as its filter.
func (t Topology) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        t.Durable,
		Description:    "meter reads, settled by meter-consumer",
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckWait:        t.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  t.MaxAckPending,
		FilterSubjects: t.Subjects,
		Replicas:       t.Replicas,
	}
}

// StreamConfig is the source stream's configuration. A full stream refuses
// new reads (the head-end is told and retries) rather than discarding old
// ones; its max age is the one bound under which a read can be lost, which
// the oldest-unsettled-read alert watches.
func (t Topology) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        t.Stream,
		Description: "meter reads from head-ends",
		Subjects:    t.Subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxAge:      t.MaxAge,
		MaxBytes:    bytesLimit(t.MaxBytes),
		Replicas:    max(t.Replicas, 1),
		Duplicates:  10 * time.Minute, // also guards dead-letter replays (replay:<dlq>:<seq>)
	}
}

// DLQStreamConfig is the dead-letter stream's configuration: no max age (a
// copy waits for a person), bounded in bytes, refusing new copies when full
// (the reads stay unsettled and the rejection is counted and alerted on).
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
		Discard:     jetstream.DiscardNew,
		MaxBytes:    bytesLimit(t.DLQMaxBytes),
		Replicas:    max(t.Replicas, 1),
		Duplicates:  dup,
	}
}

// RecordsConfig is the records bucket's configuration: one value per key,
// kept as long as a read can stay in the source stream.
func (t Topology) RecordsConfig() jetstream.KeyValueConfig {
	ttl := t.MaxAge
	if ttl <= 0 {
		ttl = 30 * 24 * time.Hour
	}
	return jetstream.KeyValueConfig{
		Bucket:      t.Bucket(),
		Description: "meter-consumer: hand-backs and dead-letter decisions of the reads of " + t.Stream + ", by stream sequence",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    max(t.Replicas, 1),
	}
}

func bytesLimit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// Ensure creates what is missing (both streams, the records bucket, the
// durable) and never changes what exists unless t.Reconcile: an existing
// stream's differences from the configured settings come back as warnings,
// an existing durable is checked (see checkDurable).
func Ensure(ctx context.Context, js jetstream.JetStream, t Topology) (*Setup, error) {
	return setup(ctx, js, t, true)
}

// Lookup requires both streams, the records bucket and the durable to exist
// and says which is missing; the durable is checked as by Ensure.
func Lookup(ctx context.Context, js jetstream.JetStream, t Topology) (*Setup, error) {
	return setup(ctx, js, t, false)
}

func setup(ctx context.Context, js jetstream.JetStream, t Topology, create bool) (*Setup, error) {
	s := &Setup{}
	src, err := t.stream(ctx, js, t.StreamConfig(), "stream", create, s)
	if err != nil {
		return nil, err
	}
	s.KeepsReads = src.Config.Retention == jetstream.LimitsPolicy
	dl, err := t.stream(ctx, js, t.DLQStreamConfig(), "dead-letter stream", create, s)
	if err != nil {
		return nil, err
	}
	s.DeadLetterWindow = dl.Config.Duplicates
	s.MaxCopySize = max(int(dl.Config.MaxMsgSize), 0)
	kv, err := t.bucket(ctx, js, create)
	if err != nil {
		return nil, err
	}
	s.Records = KVRecords{KV: kv}
	cons, err := t.durable(ctx, js, src.Config.Subjects, create)
	if err != nil {
		return nil, err
	}
	info := cons.CachedInfo()
	s.Consumer, s.AckWait, s.MaxAckPending = cons, info.Config.AckWait, info.Config.MaxAckPending
	return s, nil
}

// stream finds (or creates) a stream and notes how it differs from want.
func (t Topology) stream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, what string, create bool, s *Setup) (*jetstream.StreamInfo, error) {
	st, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && create:
		if st, err = js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", what, want.Name, err)
		}
		return st.CachedInfo(), nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("%s %s: %w (create it, or start with --create-streams): %w", what, want.Name, ErrMissing, err)
	case err != nil:
		return nil, fmt.Errorf("look up %s %s: %w", what, want.Name, err)
	}
	info := st.CachedInfo()
	diffs := streamDiffs(info.Config, want)
	if len(diffs) > 0 && t.Reconcile {
		if _, err := js.UpdateStream(ctx, reconciled(info.Config, want)); err != nil {
			return nil, fmt.Errorf("reconcile %s %s (%v): %w", what, want.Name, diffs, err)
		}
		return t.stream(ctx, js, want, what, false, s)
	}
	for _, d := range diffs {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s %s: %s (left as it is; --reconcile would change it)", what, want.Name, d))
	}
	return info, nil
}

// bucket finds (or creates) the records bucket.
func (t Topology) bucket(ctx context.Context, js jetstream.JetStream, create bool) (jetstream.KeyValue, error) {
	cfg := t.RecordsConfig()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound) && create:
		if kv, err = js.CreateKeyValue(ctx, cfg); err != nil {
			return nil, fmt.Errorf("create records bucket %s: %w", cfg.Bucket, err)
		}
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("records bucket %s: %w (create it with `nats kv add %s --history 1 --ttl %s`, or start with --create-streams): %w",
			cfg.Bucket, ErrMissing, cfg.Bucket, cfg.TTL, err)
	case err != nil:
		return nil, fmt.Errorf("look up records bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// durable finds (or creates) the durable consumer and checks it.
func (t Topology) durable(ctx context.Context, js jetstream.JetStream, streamSubjects []string, create bool) (jetstream.Consumer, error) {
	want := t.ConsumerConfig()
	cons, err := js.Consumer(ctx, t.Stream, t.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound) && create:
		if cons, err = js.CreateConsumer(ctx, t.Stream, want); err != nil {
			return nil, fmt.Errorf("create consumer %s on stream %s: %w", t.Durable, t.Stream, err)
		}
		return cons, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("consumer %s on stream %s: %w (create it, or start with --create-streams): %w", t.Durable, t.Stream, ErrMissing, err)
	case err != nil:
		return nil, fmt.Errorf("look up consumer %s on stream %s: %w", t.Durable, t.Stream, err)
	}
	have := cons.CachedInfo().Config
	fixable, fatal := checkDurable(have, want, streamSubjects)
	if len(fatal) > 0 {
		return nil, fmt.Errorf("consumer %s on stream %s: %w: %s", t.Durable, t.Stream, ErrMismatch, joinProblems(append(fatal, fixable...)))
	}
	if len(fixable) == 0 {
		return cons, nil
	}
	if !t.Reconcile {
		return nil, fmt.Errorf("consumer %s on stream %s: %w: %s; or start with --reconcile to update the durable",
			t.Durable, t.Stream, ErrMismatch, joinProblems(fixable))
	}
	upd := have
	upd.MaxDeliver, upd.BackOff, upd.AckWait, upd.MaxAckPending = -1, nil, want.AckWait, want.MaxAckPending
	upd.FilterSubject, upd.FilterSubjects = "", want.FilterSubjects
	if cons, err = js.UpdateConsumer(ctx, t.Stream, upd); err != nil {
		return nil, fmt.Errorf("reconcile consumer %s on stream %s (%s): %w", t.Durable, t.Stream, joinProblems(fixable), err)
	}
	return cons, nil
}
