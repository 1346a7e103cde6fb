package dlqops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/jstool"
)

// Replay defaults.
const (
	DefaultRate       = 10.0 // messages per second
	DefaultMaxReplays = 3
)

// maxNotes bounds the skip notes a dry run keeps for after its table.
const maxNotes = 100

// publishTimeout bounds one republish round trip.
const publishTimeout = 10 * time.Second

// ReplayOptions selects and paces a replay.
type ReplayOptions struct {
	Filter
	DryRun     bool    // list what would be replayed, change nothing
	Rate       float64 // messages per second (0: DefaultRate)
	MaxReplays int     // skip reads already replayed this many times (0: DefaultMaxReplays)
}

// Validate reports options Replay cannot use, naming the flag; it connects
// to nothing. Replay checks them too.
// MinRate is the slowest --rate: one message an hour.
const MinRate = 1.0 / 3600

func (ro ReplayOptions) Validate() error {
	_, err := ro.withDefaults()
	return err
}

func (ro ReplayOptions) withDefaults() (ReplayOptions, error) {
	if err := ro.Filter.validate(); err != nil {
		return ro, err
	}
	if ro.Rate == 0 {
		ro.Rate = DefaultRate
	}
	if !(ro.Rate > 0) || math.IsInf(ro.Rate, 0) {
		return ro, fmt.Errorf("%w --rate %v: want messages per second, more than 0", ErrInvalid, ro.Rate)
	}
	if ro.Rate < MinRate {
		// Slower, the interval between two replays overflows a duration,
		// which paced nothing.
		return ro, fmt.Errorf("%w --rate %v: want at least one message an hour (%.6f a second)", ErrInvalid, ro.Rate, MinRate)
	}
	if ro.MaxReplays == 0 {
		ro.MaxReplays = DefaultMaxReplays
	}
	if ro.MaxReplays < 0 {
		return ro, fmt.Errorf("%w --max-replays %d: want 1 or more", ErrInvalid, ro.MaxReplays)
	}
	return ro, nil
}

// ReplaySummary counts what a replay did. Every selected read is counted
// once more: Selected = Replayed + Duplicates + SkippedMaxReplays + Failed,
// unless the replay was interrupted or was a dry run.
type ReplaySummary struct {
	Selected          int // reads the filter selected
	Replayed          int // republished, confirmed, copy deleted
	Duplicates        int // already replayed (the source stream had the message id), copy deleted
	SkippedMaxReplays int // replayed MaxReplays times already; copy kept
	Failed            int // copy kept: the republish or its mark was not confirmed, or the copy could not be deleted
}

// String is the summary line.
func (s ReplaySummary) String() string {
	return fmt.Sprintf("replayed %d, skipped as duplicate %d, skipped at max replays %d, failed %d",
		s.Replayed, s.Duplicates, s.SkippedMaxReplays, s.Failed)
}

// Replay sends the copies ro selects back to their original subjects, at
// most ro.Rate a second, marks each copy replayed (a dlq.Mark in the
// dead-letter stream) once JetStream confirmed its republish, and deletes
// it once JetStream confirmed the mark. See the package documentation for
// the guarantees. The summary
// line is always written; an interrupted replay returns what it did so far
// with ctx's error.
func (o *Ops) Replay(ctx context.Context, ro ReplayOptions) (ReplaySummary, error) {
	ro, err := ro.withDefaults()
	if err != nil {
		return ReplaySummary{}, err
	}
	st, err := o.dlqStream(ctx)
	if err != nil {
		return ReplaySummary{}, err
	}
	var srcSubjects []string
	if !ro.DryRun && o.SourceStream != "" {
		src, err := jstool.Lookup(ctx, o.JS, o.SourceStream, "source stream", "--stream")
		if err != nil {
			return ReplaySummary{}, err
		}
		srcSubjects = src.CachedInfo().Config.Subjects
	}
	r := &replayer{
		ctx: ctx, o: o, st: st, ro: ro, srcSubjects: srcSubjects,
		pace: newPacer(ro.Rate, o.now, o.sleep),
		bar:  &progress{w: o.out(), on: o.Terminal && !ro.DryRun},
	}
	if ro.DryRun {
		r.table = newTable(o.out(), o.now())
	}
	err = o.scan(ctx, st, ro.Filter, scanOptions{progress: r.bar.update}, r.one)
	r.bar.end()
	w := o.out()
	if r.table != nil {
		if ferr := r.table.flush(); err == nil {
			err = ferr
		}
		for _, n := range r.notes {
			fmt.Fprintln(w, n)
		}
		if more := r.sum.SkippedMaxReplays - len(r.notes); more > 0 {
			fmt.Fprintf(w, "and %d more skipped at max replays\n", more)
		}
	}
	if ro.DryRun {
		fmt.Fprintf(w, "dry run, nothing changed: would replay %d, would skip at max replays %d\n",
			r.sum.Selected-r.sum.SkippedMaxReplays, r.sum.SkippedMaxReplays)
	} else {
		fmt.Fprintln(w, r.sum.String())
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("replay interrupted after %d reads (run it again to go on): %w", r.sum.Selected, err)
	}
	return r.sum, err
}

type replayer struct {
	ctx   context.Context
	o     *Ops
	st    jetstream.Stream
	ro    ReplayOptions
	pace  *pacer
	bar   *progress
	table *table   // dry run only
	notes []string // dry run only: skips, written after the table
	sum   ReplaySummary
	// srcSubjects are the source stream's subjects (not a dry run, and a
	// source stream named).
	srcSubjects []string
}

// one replays one selected copy. It returns an error only to stop the whole
// replay: ctx is done or the server cannot be reached.
func (r *replayer) one(e Entry) error {
	ctx, o := r.ctx, r.o
	r.sum.Selected++
	if e.ReplayCount >= r.ro.MaxReplays {
		r.sum.SkippedMaxReplays++
		note := fmt.Sprintf("seq %d: skipped, replayed %d times already (--max-replays %d); copy kept", e.Seq, e.ReplayCount, r.ro.MaxReplays)
		if !r.ro.DryRun {
			r.bar.line("%s", note)
		} else if len(r.notes) < maxNotes {
			r.notes = append(r.notes, note) // after the table
		}
		return nil
	}
	if r.ro.DryRun {
		return r.table.row(e)
	}
	data, err := r.fullRead(e)
	if err == nil {
		e.Data = data
	}
	var msg *nats.Msg
	if err == nil {
		msg, err = ReplayMsg(o.Stream, e)
	}
	prefix, ok := e.prefix()
	if err == nil && !ok {
		err = errUnmarkable(e)
	}
	if err != nil {
		r.sum.Failed++
		r.bar.line("seq %d: not replayed, copy kept: %v", e.Seq, err)
		return nil
	}
	if err := r.pace.wait(ctx); err != nil {
		r.sum.Selected--
		return err
	}
	ack, err := r.publish(msg)
	if err != nil {
		if ctx.Err() != nil {
			r.sum.Selected--
			return ctx.Err()
		}
		r.sum.Failed++
		if jstool.Unreachable(err) {
			return fmt.Errorf("%w: replay seq %d to %s (copy kept; run the replay again: within the source stream's duplicate window a republish that did land counts as a duplicate): %w",
				jstool.ErrNotConnected, e.Seq, msg.Subject, err)
		}
		r.bar.line("seq %d: not replayed, copy kept: publish to %s: %v", e.Seq, msg.Subject, err)
		return nil
	}
	// The republish is confirmed: mark the copy replayed, so that the audit
	// does not take the read for billed once its copy is gone.
	m := markOf(e, dlq.MarkReplayed)
	m.ReplayedAs = ack.Sequence
	if err := o.mark(ctx, prefix, m); err != nil {
		r.sum.Failed++
		err = fmt.Errorf("seq %d: replayed as %s seq %d, but its mark was not stored; copy kept (running the replay again is safe: "+
			"the republish is a duplicate within %s's duplicate window, the mark a duplicate by its id): %w",
			e.Seq, ack.Stream, ack.Sequence, ack.Stream, err)
		if ctx.Err() != nil || jstool.Unreachable(err) {
			return jstool.Wrap("replay", err)
		}
		r.bar.line("%v", err)
		return nil
	}
	// The mark is confirmed: only now may the copy go.
	if _, err := deleteCopy(ctx, r.st, e.Seq); err != nil {
		r.sum.Failed++
		err = fmt.Errorf("seq %d: replayed as %s seq %d, but its copy was not deleted (run the replay again within %s's duplicate window to remove it): %w",
			e.Seq, ack.Stream, ack.Sequence, ack.Stream, err)
		if ctx.Err() != nil || jstool.Unreachable(err) {
			return jstool.Wrap("replay", err)
		}
		r.bar.line("%v", err)
		return nil
	}
	if ack.Duplicate {
		r.sum.Duplicates++
	} else {
		r.sum.Replayed++
	}
	return nil
}

// publish republishes msg and returns JetStream's confirmation.
func (r *replayer) publish(msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(r.ctx, publishTimeout)
	defer cancel()
	// Not WithExpectStream: the server would store its Nats-Expected-Stream
	// with the replayed read, which carries its own headers and the
	// replay's three only. The subject is checked against the source
	// stream's instead (no two streams of an account share a subject, so
	// one the source stream takes no other does, and a read replayed into
	// another stream would be a stray copy there), and the acknowledgement
	// says which stream stored it.
	if src := r.o.SourceStream; src != "" && !slices.ContainsFunc(r.srcSubjects, func(p string) bool { return subjectMatch(p, msg.Subject) }) {
		return nil, fmt.Errorf("%w: stream %s takes %s", ErrWrongStream, src, strings.Join(r.srcSubjects, ", "))
	}
	ack, err := r.o.JS.PublishMsg(ctx, msg)
	if err != nil {
		return nil, err
	}
	if src := r.o.SourceStream; src != "" && ack.Stream != src {
		return nil, fmt.Errorf("stored in stream %q, want %q", ack.Stream, src)
	}
	return ack, nil
}

// ReplayMsgID is the message id of the replay of dead-letter copy seq: the
// source stream's duplicate window drops a second replay of the same copy.
func ReplayMsgID(dlqStream string, seq uint64) string {
	return "replay:" + dlqStream + ":" + strconv.FormatUint(seq, 10)
}

// ReplayMsg returns the message that replays e: the original payload, byte
// for byte, to the original subject, with the copy's headers minus every
// Dlq-* header, Nats-Msg-Id and publish directives (see kept), plus
// Nats-Msg-Id ReplayMsgID, Dlq-Replayed-From and Dlq-Replay-Count (the count
// in e plus one).
func ReplayMsg(dlqStream string, e Entry) (*nats.Msg, error) {
	if e.Subject == "" || !validPattern(e.Subject) || strings.ContainsAny(e.Subject, "*>") {
		return nil, fmt.Errorf("%w original subject %q in the Dlq-Subject header", ErrInvalid, e.Subject)
	}
	h := make(nats.Header, len(e.Header)+3)
	for k, v := range e.Header {
		if !kept(k) {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	h.Set(nats.MsgIdHdr, ReplayMsgID(dlqStream, e.Seq))
	h.Set(HeaderReplayedFrom, strconv.FormatUint(e.Seq, 10))
	h.Set(HeaderReplayCount, strconv.Itoa(e.ReplayCount+1))
	return &nats.Msg{Subject: e.Subject, Header: h, Data: e.Data}, nil
}

// kept reports whether a header of a copy goes on its replay. Dropped: the
// provenance (Dlq-*), and every header the server acts on (dlq.ServerHeader:
// the copy's message id, Nats-Expected-Stream of the dead-letter publish,
// which the source stream would refuse, and any directive an older copy
// still carries, such as Nats-Batch-* or Nats-TTL).
func kept(k string) bool {
	return !strings.HasPrefix(strings.ToLower(k), "dlq-") && !dlq.ServerHeader(k)
}

// fullRead returns the payload to replay: the copy's own, or, for a copy
// truncated to fit the dead-letter stream, the full read from the source
// stream, where it stays after its TERM.
func (r *replayer) fullRead(e Entry) ([]byte, error) {
	if !e.Truncated() {
		return e.Data, nil
	}
	src, seq := e.Header.Get(dlq.HeaderStream), e.Header.Get(dlq.HeaderSequence)
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || src == "" {
		return nil, fmt.Errorf("truncated copy without %s/%s headers", dlq.HeaderStream, dlq.HeaderSequence)
	}
	st, err := r.o.JS.Stream(r.ctx, src)
	if err != nil {
		return nil, fmt.Errorf("truncated copy; the full read was in stream %s: %w", src, err)
	}
	m, err := st.GetMsg(r.ctx, n)
	if err != nil {
		return nil, fmt.Errorf("truncated copy; the full read is no longer in %s at sequence %d: %w", src, n, err)
	}
	if size := e.Header.Get(dlq.HeaderOriginalSize); size != strconv.Itoa(len(m.Data)) || m.Subject != e.Subject {
		return nil, fmt.Errorf("truncated copy; %s at sequence %d is %d bytes on %s, not the %s-byte read of %s", src, n, len(m.Data), m.Subject, size, e.Subject)
	}
	if !e.PublishedAt.IsZero() && !m.Time.Equal(e.PublishedAt) {
		return nil, fmt.Errorf("truncated copy; %s at sequence %d is another read, stored %s, not at %s (the stream was re-created)",
			src, n, m.Time.UTC().Format(time.RFC3339Nano), e.PublishedAt.UTC().Format(time.RFC3339Nano))
	}
	return m.Data, nil
}

// deleteCopy deletes the copy at seq. A copy that is already gone (another
// replay or purge took it) is not an error, and reports deleted false.
func deleteCopy(ctx context.Context, st jetstream.Stream, seq uint64) (deleted bool, err error) {
	err = st.DeleteMsg(ctx, seq)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		if _, gerr := st.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return false, nil
		}
	}
	return false, fmt.Errorf("delete seq %d: %w", seq, err)
}
