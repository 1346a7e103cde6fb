package topology

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/stream"
)

// Topology names the streams, the durable consumer and the records bucket
// the service uses, and the settings it gives them when it creates them.
type Topology struct {
	Stream   string        // source stream, e.g. METER_READS
	Subjects []string      // the subjects consumed, e.g. meter.reads.>
	MaxAge   time.Duration // a created source stream's max age (0: none)
	MaxBytes int64         // a created source stream's max bytes (<= 0: none)
	// Duplicates is a created source stream's duplicate window, required:
	// > 0 (the binary's is config's stream.duplicates).
	Duplicates time.Duration
	Durable    string // the shared durable pull consumer, e.g. meter-consumer

	DLQStream     string        // dead-letter stream, e.g. METER_READS_DLQ
	DLQPrefix     string        // dead-letter subject prefix, e.g. meter.dlq
	DLQDuplicates time.Duration // dead-letter duplicate window, required: >= MinDLQDuplicates
	DLQMaxBytes   int64         // a created dead-letter stream's max bytes (<= 0: none)

	// RecordsBucket is the key-value bucket of the reads' records (see
	// stream.Record); "" derives it from the stream and the durable.
	RecordsBucket string
	// RecordsTTL is the records' TTL when the source stream has no max age
	// (with one, its max age is theirs), required: > 0 (the binary's is
	// config.RecordsTTL).
	RecordsTTL time.Duration

	Replicas      int           // stream and consumer replicas when created
	AckWait       time.Duration // consumer AckWait
	MaxAckPending int           // consumer MaxAckPending

	// PullBatch is consumer.pull_batch (0: stream.AutoPullBatch of Concurrency,
	// HandlerTimeout and the durable's ack wait): the durable must let a
	// pull ask for that many reads.
	PullBatch      int
	Concurrency    int
	HandlerTimeout time.Duration

	// Reconcile updates an existing durable, stream or bucket whose
	// settings differ from these, instead of refusing to start (durable) or
	// warning (streams).
	Reconcile bool

	// Switches name, in the messages, how a person asks the caller to
	// create, to reconcile or to keep one copy.
	Switches Switches
}

// ErrMissing wraps a stream, consumer or bucket that does not exist while
// the service was not asked to create it.
var ErrMissing = errors.New("missing")

// ErrMismatch wraps an existing durable whose settings the service cannot
// run on, while it was not asked to reconcile them.
var ErrMismatch = errors.New("settings the service cannot run on")

// MinDLQDuplicates is the shortest dead-letter duplicate window
// Topology.DLQDuplicates may ask for. It has no default here: the binary's
// is config's dlq.duplicates.
const MinDLQDuplicates = 10 * time.Minute

// Setup is what the server holds for the service, as found (or made) at
// start: the consumer, the records, and the settings the pipeline must
// follow because they are the server's, not the configuration's.
type Setup struct {
	Consumer jetstream.Consumer
	Records  stream.KVRecords
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
	// PullBatch is how many reads one pull asks for, as checked against
	// the durable's max_request_batch.
	PullBatch int
	// PausedUntil is when the durable's pause ends (zero: not paused).
	PausedUntil time.Time
	// Replicas are the source stream's, the dead-letter stream's and the
	// records bucket's.
	Replicas Replicas
	// Reconciled says what Reconcile changed, one line each; log each
	// once.
	Reconciled []string
	// Warnings are differences between existing streams and the settings
	// the service would have created them with; log each once.
	Warnings []string
}

// Replicas are how many copies the server keeps of what the service bills
// from.
type Replicas struct {
	Stream, DeadLetter, Records int
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
		Duplicates:  t.Duplicates, // also guards dead-letter replays (replay:<dlq>:<seq>)
	}
}

// DLQStreamConfig is the dead-letter stream's configuration: no max age (a
// copy waits for a person), bounded in bytes, refusing new copies when full
// (the reads stay unsettled and the rejection is counted and alerted on).
func (t Topology) DLQStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        t.DLQStream,
		Description: "dead-lettered meter reads, with their provenance in Dlq-* headers",
		Subjects:    []string{t.DLQPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    bytesLimit(t.DLQMaxBytes),
		Replicas:    max(t.Replicas, 1),
		Duplicates:  t.DLQDuplicates,
	}
}

// RecordsConfig is the records bucket's configuration: one value per key,
// kept as long as a read can stay in the source stream.
func (t Topology) RecordsConfig() jetstream.KeyValueConfig { return t.recordsConfig(t.MaxAge) }

// recordsConfig is RecordsConfig for a source stream of max age
// streamMaxAge (0: none, and records live t.RecordsTTL).
func (t Topology) recordsConfig(streamMaxAge time.Duration) jetstream.KeyValueConfig {
	ttl := streamMaxAge
	if ttl <= 0 {
		ttl = t.RecordsTTL
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
	if t.DLQDuplicates < MinDLQDuplicates {
		return nil, fmt.Errorf("topology: Topology.DLQDuplicates (%s) must be >= %s", t.DLQDuplicates, MinDLQDuplicates)
	}
	if t.Duplicates <= 0 {
		return nil, fmt.Errorf("topology: Topology.Duplicates (%s) must be > 0", t.Duplicates)
	}
	if t.RecordsTTL <= 0 {
		return nil, fmt.Errorf("topology: Topology.RecordsTTL (%s) must be > 0", t.RecordsTTL)
	}
	s := &Setup{}
	src, err := t.stream(ctx, js, t.StreamConfig(), "stream", create, sourceFindings, s)
	if err != nil {
		return nil, err
	}
	s.KeepsReads = src.Config.Retention == jetstream.LimitsPolicy
	dl, err := t.stream(ctx, js, t.DLQStreamConfig(), "dead-letter stream", create, deadLetterFindings, s)
	if err != nil {
		return nil, err
	}
	s.DeadLetterWindow = dl.Config.Duplicates
	s.MaxCopySize = max(int(dl.Config.MaxMsgSize), 0)
	kv, replicas, err := t.bucket(ctx, js, src.Config.MaxAge, create, s)
	if err != nil {
		return nil, err
	}
	s.Records = stream.KVRecords{KV: kv}
	s.Replicas = Replicas{Stream: src.Config.Replicas, DeadLetter: dl.Config.Replicas, Records: replicas}
	cons, err := t.durable(ctx, js, src, create, s)
	if err != nil {
		return nil, err
	}
	info := cons.CachedInfo()
	s.Consumer, s.AckWait, s.MaxAckPending = cons, info.Config.AckWait, info.Config.MaxAckPending
	s.PullBatch = t.pullBatch(info.Config.AckWait)
	if info.Paused && info.Config.PauseUntil != nil {
		s.PausedUntil = *info.Config.PauseUntil
	}
	return s, nil
}

// stream finds (or creates) a stream and checks it (see converge).
func (t Topology) stream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, what string, create bool,
	check func(have, want jetstream.StreamConfig) []finding, s *Setup) (*jetstream.StreamInfo, error) {
	st, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && create:
		if st, err = js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", what, want.Name, t.replicasRefused(err, want.Replicas))
		}
		return st.CachedInfo(), nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		// "stream missing: NAME": /readyz says it in those words (issue 13).
		return nil, fmt.Errorf("%s %w: %s (create it%s): %w", what, ErrMissing, want.Name, t.Switches.orCreate(), err)
	case err != nil:
		return nil, fmt.Errorf("look up %s %s: %w", what, want.Name, err)
	}
	return t.converge(ctx, js, what+" "+want.Name, st.CachedInfo(),
		func(have jetstream.StreamConfig) []finding { return check(have, want) }, s)
}

// bucket finds (or creates) the records bucket, whose TTL follows the
// source stream's own max age, and checks it (see recordsFindings). It
// returns the bucket's replicas too.
func (t Topology) bucket(ctx context.Context, js jetstream.JetStream, streamMaxAge time.Duration, create bool, s *Setup) (jetstream.KeyValue, int, error) {
	cfg := t.recordsConfig(streamMaxAge)
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound) && create:
		if kv, err = js.CreateKeyValue(ctx, cfg); err != nil {
			return nil, 0, fmt.Errorf("create records bucket %s: %w", cfg.Bucket, t.replicasRefused(err, cfg.Replicas))
		}
		return kv, cfg.Replicas, nil
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, 0, fmt.Errorf("records bucket %s: %w (create it with `nats kv add %s --history 1 --ttl %s`%s): %w",
			cfg.Bucket, ErrMissing, cfg.Bucket, cfg.TTL, t.Switches.orCreate(), err)
	case err != nil:
		return nil, 0, fmt.Errorf("look up records bucket %s: %w", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("look up records bucket %s: %w", cfg.Bucket, err)
	}
	status, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, 0, fmt.Errorf("records bucket %s: its status is a %T, not a JetStream bucket's", cfg.Bucket, st)
	}
	info, err := t.converge(ctx, js, "records bucket "+cfg.Bucket, status.StreamInfo(), func(have jetstream.StreamConfig) []finding {
		return recordsFindings(have, cfg, t.Stream, streamMaxAge)
	}, s)
	if err != nil {
		return nil, 0, err
	}
	return kv, info.Config.Replicas, nil
}

// durable finds (or creates) the durable consumer and checks it.
func (t Topology) durable(ctx context.Context, js jetstream.JetStream, src *jetstream.StreamInfo, create bool, s *Setup) (jetstream.Consumer, error) {
	want := t.ConsumerConfig()
	cons, err := js.Consumer(ctx, t.Stream, t.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound) && create:
		if cons, err = js.CreateConsumer(ctx, t.Stream, want); err != nil {
			return nil, fmt.Errorf("create consumer %s on stream %s: %w", t.Durable, t.Stream, t.replicasRefused(err, want.Replicas))
		}
		return cons, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("consumer %s on stream %s: %w (create it%s): %w", t.Durable, t.Stream, ErrMissing, t.Switches.orCreate(), err)
	case err != nil:
		return nil, fmt.Errorf("look up consumer %s on stream %s: %w", t.Durable, t.Stream, err)
	}
	info := cons.CachedInfo()
	have := info.Config
	fixable, fatal := checkDurable(have, want, src.Config.Subjects, t.pullBatch(have.AckWait), t.Switches)
	skips, note := skipsReads(have, info.Created, src.State)
	if skips {
		fatal = append(fatal, note)
	} else if note != "" {
		s.Warnings = append(s.Warnings, fmt.Sprintf("consumer %s on stream %s: %s", t.Durable, t.Stream, note))
	}
	if len(fatal) > 0 {
		return nil, fmt.Errorf("consumer %s on stream %s: %w: %s", t.Durable, t.Stream, ErrMismatch, joinProblems(append(fatal, fixable...)))
	}
	if !t.Reconcile {
		if len(fixable) > 0 {
			return nil, fmt.Errorf("consumer %s on stream %s: %w: %s; or %s to update the durable",
				t.Durable, t.Stream, ErrMismatch, joinProblems(fixable), t.Switches.toReconcile())
		}
		return cons, nil
	}
	if len(fixable) == 0 && have.AckWait == want.AckWait && have.MaxAckPending == want.MaxAckPending {
		return cons, nil
	}
	upd := reconciledDurable(have, want, t.pullBatch(want.AckWait))
	if cons, err = js.UpdateConsumer(ctx, t.Stream, upd); err != nil {
		return nil, fmt.Errorf("reconcile consumer %s on stream %s (%s): %w", t.Durable, t.Stream, joinProblems(fixable), err)
	}
	for _, f := range fixable {
		s.Reconciled = append(s.Reconciled, fmt.Sprintf("consumer %s on stream %s: %s (changed by %s)", t.Durable, t.Stream, f, t.Switches.reconciler()))
	}
	if have.AckWait != want.AckWait || have.MaxAckPending != want.MaxAckPending {
		s.Reconciled = append(s.Reconciled, fmt.Sprintf("consumer %s on stream %s: ack wait %s and max ack pending %d set to %s and %d (changed by %s)",
			t.Durable, t.Stream, have.AckWait, have.MaxAckPending, want.AckWait, want.MaxAckPending, t.Switches.reconciler()))
	}
	return cons, nil
}

// pullBatch is how many reads one pull asks for on a durable of the given
// ack wait: consumer.pull_batch, or stream.AutoPullBatch, as the
// stream.Consumer takes it.
func (t Topology) pullBatch(ackWait time.Duration) int {
	if t.PullBatch > 0 {
		return t.PullBatch
	}
	return stream.AutoPullBatch(t.Concurrency, t.HandlerTimeout, ackWait)
}
