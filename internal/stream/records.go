package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

// Record is what the server's delivery count cannot tell about one read,
// kept by stream sequence where every replica finds it.
type Record struct {
	// PublishedAt is the read's stream timestamp. With the stream sequence
	// (the key) it names the read: after the source stream is deleted and
	// re-created, sequences start again at 1, and a record whose
	// PublishedAt is not the delivery's is another read's (see of).
	PublishedAt time.Time `json:"published_at,omitzero"`
	// Calls counts the calls made for the read that failed and were
	// charged: its attempts so far. An attempt is a call: a delivery that
	// never reached one (lost in transit when pulling stopped, handed back
	// at a stop, a crash before the call) is not counted, and neither is a
	// call cut by the stop, a wait for the breaker, or a shed while the
	// engine shed broadly. Written before the delivery's NAK or TERM; a
	// delivery that ends with a 2xx writes nothing.
	Calls uint64 `json:"calls"`
	// CountsCalls marks a record that counts calls. A record written by an
	// earlier version, which counted hand-backs instead, has it unset; its
	// read's attempt is then its delivery count less its hand-backs and
	// sheds, and the record counts calls from its next write on.
	CountsCalls bool `json:"counts_calls,omitempty"`
	// HandBacks is an earlier version's count of the deliveries it handed
	// back uncharged: credited like sheds, kept, never added to.
	HandBacks uint64 `json:"hand_backs,omitempty"`
	// Sheds counts the calls the engine shed while it shed broadly (its
	// state, not the read's): not charged, but failures all the same, so the
	// read's evidence about the engine weighs less with each.
	Sheds uint64 `json:"sheds,omitempty"`
	// DeadLetter is the decision to dead-letter the read, recorded before
	// its copy is first tried: a later delivery, on any replica, stores the
	// copy with the same reason and cause without asking the downstream
	// again, and past the dead-letter stream's duplicate window looks for
	// the copy before making one.
	DeadLetter *Decision `json:"dead_letter,omitempty"`
	// Awaiting is the decision a shed at the read's last attempt would have
	// been (dead-letter, exhausted), held while a trial of the engine ran:
	// the shed is credited meanwhile, and the read's next delivery carries
	// the decision out, or calls again, by the verdict (see decide). Its
	// At is when the shed began awaiting, on the server's clock. Any later
	// write clears it.
	Awaiting *Decision `json:"awaiting,omitempty"`
}

// of reports whether r, written at written, is the record of the read md
// describes: the read's stream timestamp when r states one; for a record of
// an earlier version, which states none, when it was written after the
// read was stored (a read's record is never older than the read).
func (r Record) of(md *jetstream.MsgMetadata, written time.Time) bool {
	if !r.PublishedAt.IsZero() {
		return r.PublishedAt.Equal(md.Timestamp)
	}
	return !written.Before(md.Timestamp)
}

// clone returns a copy of r that shares nothing with it.
func (r Record) clone() Record {
	if r.DeadLetter != nil {
		d := *r.DeadLetter
		r.DeadLetter = &d
	}
	return r
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
	// d.Error is the classified error's text, its cause first: the error
	// rebuilt prints the same text again.
	ce := classify.NewTransient(d.Cause, errors.New(strings.TrimPrefix(d.Error, string(d.Cause)+": ")))
	if d.Class == classify.Permanent.String() {
		ce.Class = classify.Permanent
	}
	return ce
}

// MaxUncalled bounds the deliveries of a read that are not charged because
// no call of theirs is on record: lost in transit when pulling stopped,
// handed back at a stop, a crash before the call, or a call whose record
// could not be written. Each of these is rare in one read's life; a read
// delivered more often than this without a recorded call is one whose
// deliveries keep being cut short (a read that crashes the process during
// its call looks the same), and the rest count as attempts so that it
// still ends in the dead-letter stream.
const MaxUncalled = 10

// MaxSheds bounds the calls of a read credited as sheds (see Record.Sheds):
// a long overload can shed one read many times, but not without end.
const MaxSheds = 100

// Records keeps the Record of each read, by stream sequence. *KVRecords is
// the production implementation; a nil Records in Options keeps none (every
// delivery then counts as an attempt, and a copy is found again only within
// the duplicate window).
type Records interface {
	// Get returns what is stored at seq: a zero Stored when nothing is.
	Get(ctx context.Context, seq uint64) (Stored, error)
	// Put stores r at seq over revision rev (0: only if nothing is stored)
	// and returns the new revision. It returns an error wrapping
	// ErrRecordConflict when another writer stored a record since rev.
	Put(ctx context.Context, seq uint64, r Record, rev uint64) (uint64, error)
}

// Stored is a record as read: its revision (0: nothing is stored) and when
// it was written.
type Stored struct {
	Record   Record
	Revision uint64
	Written  time.Time
}

// ErrRecordConflict: the record changed since it was read.
var ErrRecordConflict = errors.New("record changed since it was read")

// KVRecords keeps records in a JetStream key-value bucket, one key per
// stream sequence, each written on the revision it was read at.
type KVRecords struct{ KV jetstream.KeyValue }

// Get returns the record of seq.
func (k KVRecords) Get(ctx context.Context, seq uint64) (Stored, error) {
	e, err := k.KV.Get(ctx, strconv.FormatUint(seq, 10))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Stored{}, nil
	}
	if err != nil {
		return Stored{}, fmt.Errorf("get record of %d: %w", seq, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Stored{}, fmt.Errorf("record of %d: %w", seq, err)
	}
	return Stored{Record: r, Revision: e.Revision(), Written: e.Created()}, nil
}

// Put stores the record of seq: created when rev is 0, else updated on rev.
func (k KVRecords) Put(ctx context.Context, seq uint64, r Record, rev uint64) (uint64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	key := strconv.FormatUint(seq, 10)
	var next uint64
	if rev == 0 {
		next, err = k.KV.Create(ctx, key, b)
	} else {
		next, err = k.KV.Update(ctx, key, b, rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, fmt.Errorf("put record of %d on revision %d: %w: %w", seq, rev, ErrRecordConflict, err)
	case err != nil:
		return 0, fmt.Errorf("put record of %d: %w", seq, err)
	}
	return next, nil
}

type noRecords struct{}

func (noRecords) Get(context.Context, uint64) (Stored, error)                 { return Stored{}, nil }
func (noRecords) Put(context.Context, uint64, Record, uint64) (uint64, error) { return 0, nil }

// RecordsTimeout bounds one read or write of a record.
const RecordsTimeout = 2 * time.Second

// attemptOf is the attempt of the read's delivery md with record r: the
// calls charged to it so far, plus one. Its deliveries that reached no
// recorded call (at most MaxUncalled of them) and its credited sheds are
// left out; without a record that could be read (kept false: records are
// not kept, or the look-up failed), every delivery counts, which can only
// make the read look older, never lose it. A record of an earlier version
// (see Record.CountsCalls) takes its hand-backs and sheds off the delivery
// count instead, every other delivery being charged.
func attemptOf(md *jetstream.MsgMetadata, r Record, kept bool) uint64 {
	n := md.NumDelivered
	if n <= 1 || !kept {
		return max(n, 1)
	}
	prior := n - 1
	credits := min(r.Sheds+r.HandBacks, prior)
	calls := min(r.Calls, prior-credits)
	if r.earlier() {
		calls = prior - credits // every delivery not credited was charged
	}
	uncalled := prior - credits - calls
	return n - min(credits, MaxSheds) - min(uncalled, MaxUncalled)
}

// earlier reports whether r was written by an earlier version, which
// counted hand-backs and sheds, not calls.
func (r Record) earlier() bool {
	return !r.CountsCalls && (r.HandBacks > 0 || r.Sheds > 0 || r.DeadLetter != nil)
}

// counted returns r as a record that counts calls: one of an earlier
// version gets the calls its delivery count stood for at delivery md (its
// credits are kept), so that its read's attempt stays what it was.
func counted(md *jetstream.MsgMetadata, r Record) Record {
	if r.earlier() {
		prior := max(md.NumDelivered, 1) - 1
		r.Calls = prior - min(r.Sheds+r.HandBacks, prior)
	}
	r.CountsCalls = true
	return r
}

// recordTries bounds the writes of one change to a record: a write that
// meets another writer's revision reads the record again and is applied to
// it again, at most this many times in all.
const recordTries = 4

// lookUp returns the record of a delivery and its revision: none for a
// first delivery, otherwise looked up, and a record of another read at the
// same stream sequence taken for none (see own). known reports whether the
// record was read: after a look-up that failed (logged and counted) the
// read goes on as if nothing were recorded, the delivery count alone
// deciding, which can only make it look older, never lose it; but nothing
// may then be written over what could not be read.
// The look-up ends by deadline (zero: RecordsTimeout from now) or with ctx.
func (c *Consumer) lookUp(ctx context.Context, md *jetstream.MsgMetadata, deadline time.Time) (rec Record, rev uint64, known bool) {
	if md.NumDelivered <= 1 {
		return Record{}, 0, true
	}
	if limit := c.now().Add(RecordsTimeout); deadline.IsZero() || limit.Before(deadline) {
		deadline = limit
	}
	ctx, cancel := c.within(ctx, deadline)
	defer cancel()
	s, err := c.records.Get(ctx, md.Sequence.Stream)
	if err != nil {
		c.m.recordErrors.WithLabelValues("get").Inc()
		c.log.Warn("record look-up failed; the delivery count alone decides", slog.Uint64("stream_seq", md.Sequence.Stream), slog.Any("error", err))
		return Record{}, 0, false
	}
	return c.own(md, s), s.Revision, true
}

// own returns the stored record when it is the record of the read md
// describes. One of another read at the same stream sequence (the source
// stream was deleted and re-created since it was written) is counted,
// logged and taken for none; its revision still lets this read's record
// replace it.
func (c *Consumer) own(md *jetstream.MsgMetadata, s Stored) Record {
	if s.Revision == 0 || s.Record.of(md, s.Written) {
		return s.Record
	}
	c.m.mismatches.WithLabelValues(mismatchRecord).Inc()
	c.log.Warn("record of another read at this stream sequence ignored: the stream was re-created",
		slog.Uint64("stream_seq", md.Sequence.Stream), slog.Time("published_at", md.Timestamp),
		slog.Time("record_published_at", s.Record.PublishedAt), slog.Time("record_written", s.Written))
	return Record{}
}

// change applies f to the delivery's record and stores it, with the read's
// stream timestamp and the delivery's charged call if it made one (see
// delivery.charged), on the revision it was read at. When another writer
// stored a record in between, it reads that one and applies f to it again
// (counted and logged), so that two replicas never write over each other.
// A record that could not be read (d.known false) is never written: that
// is counted and logged; nor is the record of a delivery whose lease ran
// out (counted and logged by the delivery). change reports whether the record was stored;
// d.rec and d.rev are then the record as stored. The writes end with ctx
// and within RecordsTimeout.
func (c *Consumer) change(ctx context.Context, d *delivery, f func(*Record)) bool {
	if d.lost("record") {
		return false // not held any more: another replica may hold the read
	}
	seq := d.md.Sequence.Stream
	if !d.known {
		c.m.recordSkips.Inc()
		c.log.Warn("record not written: it could not be read first", slog.Uint64("stream_seq", seq))
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, RecordsTimeout)
	defer cancel()
	for try := 1; ; try++ {
		r := counted(d.md, d.rec.clone())
		r.Awaiting = nil // the decision awaiting a verdict is this delivery's to write again, or settled by it
		f(&r)
		if d.charged {
			r.Calls++
		}
		r.PublishedAt = d.md.Timestamp
		rev, err := c.records.Put(ctx, seq, r, d.rev)
		if err == nil {
			d.rec, d.rev, d.charged = r, rev, false
			return true
		}
		if !errors.Is(err, ErrRecordConflict) || try == recordTries {
			c.m.recordErrors.WithLabelValues("put").Inc()
			c.log.Warn("record not stored", slog.Uint64("stream_seq", seq), slog.Any("error", err))
			return false
		}
		c.m.recordConflicts.Inc()
		c.log.Info("record changed by another writer since it was read; read again", slog.Uint64("stream_seq", seq), slog.Uint64("revision", d.rev))
		s, err := c.records.Get(ctx, seq)
		if err != nil {
			c.m.recordErrors.WithLabelValues("get").Inc()
			c.log.Warn("record not stored: it changed and could not be read again", slog.Uint64("stream_seq", seq), slog.Any("error", err))
			d.known = false
			return false
		}
		d.rec, d.rev = c.own(d.md, s), s.Revision
	}
}
