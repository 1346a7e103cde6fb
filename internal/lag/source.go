package lag

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Source is what a reading needs: the durable consumer, the source stream
// and one of its messages, the dead-letter stream, and whether the records
// bucket is there.
type Source interface {
	ConsumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error)
	StreamInfo(ctx context.Context) (*jetstream.StreamInfo, error)
	// GetMsg returns the source stream's first message at or after seq on
	// subject (which may hold wildcards), or jetstream.ErrMsgNotFound.
	GetMsg(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error)
	DeadLetterInfo(ctx context.Context) (*jetstream.StreamInfo, error)
	// OldestCopy returns the dead-letter stream's first copy at or after
	// seq (marks left out: their subjects are not copies'), or
	// jetstream.ErrMsgNotFound.
	OldestCopy(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error)
	// RecordsBucket looks up the records bucket's stream: nil when the
	// server has it, an error matching jetstream.ErrStreamNotFound or
	// jetstream.ErrBucketNotFound when the server says it does not exist.
	RecordsBucket(ctx context.Context) error
	// Names are the names a reading reads, for the log.
	Names() Names
}

// Names are the source stream, the durable and the records bucket a Source
// reads.
type Names struct {
	Stream, Durable, Bucket string
}

// JetStream reads from a JetStream context by names. It needs the API
// subjects CONSUMER.INFO of the durable, STREAM.INFO of both streams and of
// the records bucket's (KV_<Bucket>), and STREAM.MSG.GET of both streams
// (DIRECT.GET when a stream allows direct gets).
type JetStream struct {
	JS                       jetstream.JetStream
	Stream, Durable, DLQName string
	// Bucket is the records bucket's name (topology.Topology.Bucket).
	Bucket string
	// CopySubjects are the subjects of the dead-letter copies:
	// <prefix>.<subject> for each of the source stream's subjects
	// (dlq.Subject). A mark (<prefix>._mark.…) matches none.
	CopySubjects []string
}

// ConsumerInfo reads the durable consumer's info.
func (j JetStream) ConsumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := j.JS.Consumer(ctx, j.Stream, j.Durable)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil // fetched by Consumer just now
}

// StreamInfo reads the source stream's info.
func (j JetStream) StreamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	return j.info(ctx, j.Stream)
}

// DeadLetterInfo reads the dead-letter stream's info.
func (j JetStream) DeadLetterInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	return j.info(ctx, j.DLQName)
}

// GetMsg gets the source stream's first message at or after seq on subject.
func (j JetStream) GetMsg(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	s, err := j.JS.Stream(ctx, j.Stream)
	if err != nil {
		return nil, err
	}
	return s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
}

// RecordsBucket looks up the records bucket's stream, KV_<Bucket>: one
// STREAM.INFO, as cheap as the streams' look-ups.
func (j JetStream) RecordsBucket(ctx context.Context) error {
	if j.Bucket == "" {
		return errors.New("no records bucket named") // never taken for a bucket gone
	}
	_, err := j.JS.Stream(ctx, "KV_"+j.Bucket)
	return err
}

// Names returns the stream, the durable and the bucket j reads.
func (j JetStream) Names() Names {
	return Names{Stream: j.Stream, Durable: j.Durable, Bucket: j.Bucket}
}

func (j JetStream) info(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	s, err := j.JS.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.CachedInfo(), nil // fetched by Stream just now
}

// OldestCopy gets the dead-letter stream's first copy at or after seq: the
// earliest of the first message on each copy subject.
func (j JetStream) OldestCopy(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	s, err := j.JS.Stream(ctx, j.DLQName)
	if err != nil {
		return nil, err
	}
	var oldest *jetstream.RawStreamMsg
	for _, subj := range j.CopySubjects {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if oldest == nil || m.Sequence < oldest.Sequence {
			oldest = m
		}
	}
	if oldest == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return oldest, nil
}
