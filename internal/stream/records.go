package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

// Record is what the server's delivery count cannot tell about one read,
// kept by stream sequence where every replica finds it.
type Record struct {
	// HandBacks counts the deliveries this service handed back without a
	// call to the downstream being charged: the process was stopping, or
	// the read was waiting for the breaker. They are subtracted from the
	// delivery count to give the attempt (at most MaxHandBacks of them).
	HandBacks uint64 `json:"hand_backs,omitempty"`
	// Sheds counts the deliveries whose call the engine shed while it shed
	// broadly (its state, not the read's): credited back like hand-backs,
	// but failures all the same, so the read's evidence about the engine
	// weighs less with each.
	Sheds uint64 `json:"sheds,omitempty"`
	// DeadLetter is the decision to dead-letter the read, recorded before
	// its copy is first tried: a later delivery, on any replica, stores the
	// copy with the same reason and cause without asking the downstream
	// again, and past the dead-letter stream's duplicate window looks for
	// the copy before making one.
	DeadLetter *Decision `json:"dead_letter,omitempty"`
}

// Decision is a read's dead-letter fate.
type Decision struct {
	Reason dlq.Reason     `json:"reason"`
	Class  string         `json:"class"`
	Cause  classify.Cause `json:"cause"`
	Error  string         `json:"error"`
	At     time.Time      `json:"at"`   // when the first copy was tried
	Last   time.Time      `json:"last"` // when the last copy was tried
}

func (d *Decision) classified() *classify.Error {
	ce := classify.NewTransient(d.Cause, errors.New(d.Error))
	if d.Class == classify.Permanent.String() {
		ce.Class = classify.Permanent
	}
	return ce
}

// MaxHandBacks bounds the hand-backs subtracted from a read's delivery
// count. A stop or a breaker wait is a rare event in one read's life; a
// read handed back more often than this is one whose delivery keeps being
// cut short, and the rest count as attempts so that it still ends in the
// dead-letter stream.
const MaxHandBacks = 100

// Records keeps the Record of each read, by stream sequence. *KVRecords is
// the production implementation; a nil Records in Options keeps none (every
// hand-back then costs an attempt, and a copy is found again only within
// the duplicate window).
type Records interface {
	// Get returns the read's record: the zero Record when there is none.
	Get(ctx context.Context, seq uint64) (Record, error)
	// Put stores the read's record.
	Put(ctx context.Context, seq uint64, r Record) error
}

// KVRecords keeps records in a JetStream key-value bucket, one key per
// stream sequence.
type KVRecords struct{ KV jetstream.KeyValue }

// Get returns the record of seq.
func (k KVRecords) Get(ctx context.Context, seq uint64) (Record, error) {
	e, err := k.KV.Get(ctx, strconv.FormatUint(seq, 10))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, nil
	}
	if err != nil {
		return Record{}, fmt.Errorf("get record of %d: %w", seq, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, fmt.Errorf("record of %d: %w", seq, err)
	}
	return r, nil
}

// Put stores the record of seq.
func (k KVRecords) Put(ctx context.Context, seq uint64, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := k.KV.Put(ctx, strconv.FormatUint(seq, 10), b); err != nil {
		return fmt.Errorf("put record of %d: %w", seq, err)
	}
	return nil
}

type noRecords struct{}

func (noRecords) Get(context.Context, uint64) (Record, error) { return Record{}, nil }
func (noRecords) Put(context.Context, uint64, Record) error   { return nil }

// RecordsTimeout bounds one read or write of a record.
const RecordsTimeout = 2 * time.Second

// attemptOf is the read's attempt: its delivery count less the hand-backs on
// record (at most MaxHandBacks, and never below 1).
func attemptOf(md *jetstream.MsgMetadata, r Record) uint64 {
	credit := min(r.HandBacks+r.Sheds, MaxHandBacks, md.NumDelivered-1)
	return md.NumDelivered - credit
}

// record returns the record of a delivery: none for a first delivery,
// otherwise looked up. A look-up that fails is logged and counted, and the
// read goes on as if nothing were recorded: the delivery count alone can
// only make it look older, never lose it.
// The look-up ends by deadline (zero: RecordsTimeout from now).
func (c *Consumer) record(ctx context.Context, md *jetstream.MsgMetadata, deadline time.Time) Record {
	r, _ := c.lookUp(ctx, md, deadline)
	return r
}

// lookUp is record, and reports whether the record is known (a failed
// look-up is not: nothing may be written over what could not be read).
func (c *Consumer) lookUp(ctx context.Context, md *jetstream.MsgMetadata, deadline time.Time) (Record, bool) {
	if md.NumDelivered <= 1 {
		return Record{}, true
	}
	if limit := time.Now().Add(RecordsTimeout); deadline.IsZero() || limit.Before(deadline) {
		deadline = limit
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r, err := c.records.Get(ctx, md.Sequence.Stream)
	if err != nil {
		c.m.recordErrors.WithLabelValues("get").Inc()
		c.log.Warn("record look-up failed; the delivery count alone decides", slog.Uint64("stream_seq", md.Sequence.Stream), slog.Any("error", err))
	}
	return r, err == nil
}

// putRecord stores a read's record, logging and counting a failure.
func (c *Consumer) putRecord(ctx context.Context, md *jetstream.MsgMetadata, r Record) error {
	ctx, cancel := context.WithTimeout(ctx, RecordsTimeout)
	defer cancel()
	err := c.records.Put(ctx, md.Sequence.Stream, r)
	if err != nil {
		c.m.recordErrors.WithLabelValues("put").Inc()
		c.log.Warn("record not stored", slog.Uint64("stream_seq", md.Sequence.Stream), slog.Any("error", err))
	}
	return err
}
