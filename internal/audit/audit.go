package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/jstool"
	"github.com/meterline/meter-consumer/internal/meter"
)

// Auditor accounts for every read of a period. Set the fields, then call
// Run; an Auditor is not modified by it.
type Auditor struct {
	JS        jetstream.JetStream
	Stream    string // the source stream, e.g. METER_READS
	DLQStream string // the dead-letter stream, e.g. METER_READS_DLQ
	DLQPrefix string // the copies' subject prefix, e.g. meter.dlq; "" takes copies on any subject
	Durable   string // the durable consumer whose ack floor says what is settled

	// TempDir holds the sorted runs and the spilled findings ("" = the
	// system's temporary directory); SortMemory bounds, in bytes, what
	// the audit sorts in memory before it spills (default
	// DefaultSortMemory).
	TempDir    string
	SortMemory int
	// Progress, when set, is called now and then with the reads walked so
	// far and the reads the walk may reach at most.
	Progress func(done, total uint64)
	// GetWindow is how many reads of the source stream are asked for at
	// once (default DefaultGetWindow).
	GetWindow int
	// IdleWait is how long the walk of the dead-letter stream waits for the
	// next message before it asks the server whether any are left (default
	// jstool.DefaultIdleWait).
	IdleWait time.Duration
}

// pageSize bounds the messages of the dead-letter stream buffered by the
// client at once (headers only).
const pageSize = 256

// DefaultGetWindow is how many gets of the source stream are in flight at
// once.
const DefaultGetWindow = 64

// outcome of a read, as the ledger merge needs it.
const (
	outBilled byte = iota + 1
	outDeadLettered
	outUnsettled
	outMarked // replayed or purged: its copy is gone, by a person's act
)

// maxLines bounds the ledger line numbers a finding lists.
const maxLines = 5

// copyRec is a dead-letter copy, or a mark of one (dlq.Mark: replayed or
// purged), selected for the period, as sorted.
type copyRec struct {
	seq                    uint64
	published              int64 // Unix ns; 0 when the copy does not say
	dlqSeq                 uint64
	reason, cause, subject string
	// A mark's: its kind ("" for a copy), the copy it stands for, the
	// replay's sequence, who, when (Unix ns) and why.
	mark        dlq.MarkKind
	copySeq, as uint64
	at          int64
	by, why     string
}

func encodeCopy(c copyRec) (key, val []byte) {
	key = binary.BigEndian.AppendUint64(nil, c.seq)
	key = binary.BigEndian.AppendUint64(key, uint64(c.published))
	val = binary.BigEndian.AppendUint64(nil, c.dlqSeq)
	val = binary.BigEndian.AppendUint64(val, c.copySeq)
	val = binary.BigEndian.AppendUint64(val, c.as)
	val = binary.BigEndian.AppendUint64(val, uint64(c.at))
	val = append(val, strings.Join([]string{c.reason, c.cause, c.subject, string(c.mark), c.by, c.why}, "\x00")...)
	return key, val
}

func decodeCopy(r record) copyRec {
	c := copyRec{
		seq:       binary.BigEndian.Uint64(r.key),
		published: int64(binary.BigEndian.Uint64(r.key[8:])),
		dlqSeq:    binary.BigEndian.Uint64(r.val),
		copySeq:   binary.BigEndian.Uint64(r.val[8:]),
		as:        binary.BigEndian.Uint64(r.val[16:]),
		at:        int64(binary.BigEndian.Uint64(r.val[24:])),
	}
	parts := strings.SplitN(string(r.val[32:]), "\x00", 6)
	c.reason, c.cause, c.subject, c.mark, c.by, c.why = parts[0], parts[1], parts[2], dlq.MarkKind(parts[3]), parts[4], parts[5]
	return c
}

// run is the state of one audit.
type run struct {
	a        *Auditor
	p        Period
	res      *Result
	copies   *sortedIter
	keys     *sorter // every read's key, when there is a ledger
	srcInfo  *jetstream.StreamInfo
	ackFloor uint64
	keyless  uint64 // reads settled without a copy whose payload has no key: not in the ledger
}

// Run audits period p. The Result holds the summary and the findings; the
// caller must Close it. l, when not nil, is the engine's ledger.
func (a *Auditor) Run(ctx context.Context, p Period, l *Ledger) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := jstool.CheckConn(a.JS); err != nil {
		return nil, err
	}
	src, err := jstool.Lookup(ctx, a.JS, a.Stream, "source stream", "--stream")
	if err != nil {
		return nil, err
	}
	dst, err := jstool.Lookup(ctx, a.JS, a.DLQStream, "dead-letter stream", "--dlq-stream")
	if err != nil {
		return nil, err
	}
	cons, err := a.JS.Consumer(ctx, a.Stream, a.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("durable %s on %s: %w (is --durable right?): %w", a.Durable, a.Stream, ErrNoSuchDurable, err)
	}
	if err != nil {
		return nil, jstool.Wrap("look up durable "+a.Durable, err)
	}
	ci := cons.CachedInfo()
	si := src.CachedInfo()

	res, err := newResult(a.TempDir)
	if err != nil {
		return nil, err
	}
	s := &res.Summary
	s.Stream, s.DLQStream, s.Durable, s.Period = a.Stream, a.DLQStream, a.Durable, p.String()
	s.FirstSeq, s.LastSeq = si.State.FirstSeq, si.State.LastSeq
	s.FirstTime, s.LastTime = si.State.FirstTime, si.State.LastTime
	s.AckFloor = ci.AckFloor.Stream
	s.BilledBasis = BasisAckFloor
	if l != nil {
		s.BilledBasis = BasisLedger
	}
	r := &run{a: a, p: p, res: res, srcInfo: si, ackFloor: ci.AckFloor.Stream}
	if err := r.do(ctx, dst, src, l); err != nil {
		res.Close()
		return nil, err
	}
	return res, nil
}

func (r *run) do(ctx context.Context, dst, src jetstream.Stream, l *Ledger) error {
	mem := r.a.SortMemory
	if mem <= 0 {
		mem = DefaultSortMemory
	}
	copies := newSorter(r.a.TempDir, max(mem/2, 1))
	defer copies.close()
	if err := r.collectCopies(ctx, dst, copies); err != nil {
		return err
	}
	it, err := copies.iterator()
	if err != nil {
		return err
	}
	r.copies = it
	if l != nil {
		r.keys = newSorter(r.a.TempDir, max(mem/2, 1))
		defer r.keys.close()
	}
	if err := r.walkSource(ctx, src); err != nil {
		return err
	}
	// Copies left are of reads the walk did not meet; marks of such reads
	// need nothing (the read left the stream after a person's act).
	for c, ok := r.copies.next(); ok; c, ok = r.copies.next() {
		if cr := decodeCopy(c); cr.mark == "" {
			if err := r.copyWithoutOriginal(cr, "the stream does not hold that sequence"); err != nil {
				return err
			}
		}
	}
	if r.copies.err != nil {
		return r.copies.err
	}
	r.res.Summary.Spilled = copies.spilled()
	copies.close()
	if l != nil {
		if err := r.matchLedger(*l, max(mem/2, 1)); err != nil {
			return err
		}
	}
	return r.res.finish()
}

// collectCopies sorts the dead-letter copies of the period's reads by the
// read's sequence and stream timestamp.
func (r *run) collectCopies(ctx context.Context, dst jetstream.Stream, out *sorter) error {
	created := r.srcInfo.Created
	prefix := r.a.DLQPrefix + "."
	s := &r.res.Summary
	return jstool.Walk(ctx, r.a.JS, dst, jstool.WalkOptions{HeadersOnly: true, PageSize: pageSize, IdleWait: r.a.IdleWait},
		func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
			h := m.Headers()
			if h.Get(dlq.HeaderStream) != r.a.Stream || r.a.DLQPrefix != "" && !strings.HasPrefix(m.Subject(), prefix) {
				return nil // another stream's, or not a copy
			}
			seq, err := strconv.ParseUint(h.Get(dlq.HeaderSequence), 10, 64)
			if err != nil {
				return nil
			}
			c := copyRec{seq: seq, dlqSeq: md.Sequence.Stream, reason: h.Get(dlq.HeaderReason),
				cause: h.Get(dlq.HeaderCause), subject: h.Get(dlq.HeaderSubject)}
			if m, ok := dlq.ParseMark(h); ok {
				c.mark, c.copySeq, c.as, c.by, c.why = m.Kind, m.CopySequence, m.ReplayedAs, m.By, m.Why
				if !m.At.IsZero() {
					c.at = m.At.UnixNano()
				}
			}
			pub, err := time.Parse(time.RFC3339Nano, h.Get(dlq.HeaderPublishedAt))
			if err == nil && !pub.IsZero() {
				if pub.Before(created) {
					if c.mark == "" {
						s.EarlierCopies++ // of a read of the stream before it was re-created
					}
					return nil
				}
				c.published = pub.UnixNano()
			}
			if r.p.BySeq() {
				if seq < r.p.FromSeq || seq > r.p.ToSeq {
					return nil
				}
			} else if c.published == 0 || pub.Before(r.p.Since) || pub.After(r.p.Until) {
				return nil
			}
			k, v := encodeCopy(c)
			return out.add(k, v)
		})
}

// walkSource walks the period's reads in sequence order, by gets
// (getWindow at once): the audit creates no consumer on the source stream,
// so its user needs no right to create or delete one there, where the
// fleet's durable is.
func (r *run) walkSource(ctx context.Context, src jetstream.Stream) error {
	st := r.srcInfo.State
	s := &r.res.Summary
	var expect, from, end uint64 // the next sequence expected; the walk's first and last
	var prevAt time.Time
	if r.p.BySeq() {
		if r.p.FromSeq < st.FirstSeq {
			if err := r.res.add(Finding{Kind: KindAgedOut, Seq: r.p.FromSeq, ToSeq: min(r.p.ToSeq, st.FirstSeq-1), After: st.FirstTime,
				Detail: fmt.Sprintf("before the stream's first sequence %d: aged out (max age, limits) or purged from its head", st.FirstSeq)}); err != nil {
				return err
			}
			s.AgedOut += min(r.p.ToSeq, st.FirstSeq-1) - r.p.FromSeq + 1
		}
		from, end = max(r.p.FromSeq, st.FirstSeq), min(r.p.ToSeq, st.LastSeq)
		expect = from
	} else {
		if st.Msgs == 0 && st.LastSeq > 0 && (st.LastTime.IsZero() || !r.p.Since.After(st.LastTime)) {
			// Every read left the stream, the last at LastTime (the
			// stream's first time is then zero): the period may have held
			// any of them.
			if err := r.res.add(Finding{Kind: KindAgedOut, ToSeq: st.LastSeq, After: st.LastTime,
				Detail: fmt.Sprintf("the stream holds no read any more: all %d left it (max age, limits, or a purge), the last stored at %s; how many were in the period it no longer knows",
					st.LastSeq, stamp(st.LastTime))}); err != nil {
				return err
			}
			s.AgedOut += st.LastSeq
		} else if st.FirstSeq > 1 && r.p.Since.Before(st.FirstTime) {
			if err := r.res.add(Finding{Kind: KindAgedOut, ToSeq: st.FirstSeq - 1, After: st.FirstTime,
				Detail: fmt.Sprintf("the period starts before the stream's first read (seq %d at %s): reads before it left the stream (max age, limits, or a purge of its head); how many were in the period it no longer knows",
					st.FirstSeq, stamp(st.FirstTime))}); err != nil {
				return err
			}
			s.AgedOut += st.FirstSeq - 1
		}
		end = st.LastSeq
		var err error
		if from, err = r.firstSince(ctx, src, st.FirstSeq, st.LastSeq); err != nil {
			return err
		}
	}
	if st.Msgs == 0 || from > end {
		return nil
	}
	total := end - from + 1
	past := false // the walk met a read after the period
	w := r.a.GetWindow
	if w <= 0 {
		w = DefaultGetWindow
	}
	msgs := make([]*jetstream.RawStreamMsg, w)
	errs := make([]error, w)
	for b := from; b <= end && !past; b += uint64(w) {
		n := int(min(uint64(w), end-b+1))
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { msgs[i], errs[i] = src.GetMsg(ctx, b+uint64(i)) })
		}
		wg.Wait()
		for i := range n {
			seq, m, err := b+uint64(i), msgs[i], errs[i]
			msgs[i] = nil
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue // deleted: a gap, seen at the next read
			}
			if err != nil {
				return jstool.Wrap(fmt.Sprintf("get seq %d of %s", seq, r.a.Stream), err)
			}
			if !r.p.BySeq() && m.Time.After(r.p.Until) {
				past = true
				if expect != 0 && seq > expect {
					if err := r.missing(expect, seq-1, prevAt, m.Time); err != nil {
						return err
					}
				}
				break
			}
			if expect != 0 && seq > expect {
				if err := r.missing(expect, seq-1, prevAt, m.Time); err != nil {
					return err
				}
			}
			if err := r.read(seq, m.Time, m.Subject, m.Data); err != nil {
				return err
			}
			expect, prevAt = seq+1, m.Time
		}
		if p := r.a.Progress; p != nil {
			p(min(b+uint64(n), end+1)-from, total)
		}
	}
	if !past && expect != 0 && expect <= end {
		return r.missing(expect, end, prevAt, time.Time{})
	}
	return nil
}

// firstSince returns the smallest sequence whose first read at or after
// it was stored at or after the period's start (last+1 when none): a
// binary search on the stream timestamps, a get per step.
func (r *run) firstSince(ctx context.Context, src jetstream.Stream, first, last uint64) (uint64, error) {
	lo, hi := first, last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := src.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(">"))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			hi = mid
		case err != nil:
			return 0, jstool.Wrap(fmt.Sprintf("find the period's start in %s", r.a.Stream), err)
		case !m.Time.Before(r.p.Since):
			hi = mid
		default:
			lo = m.Sequence + 1
		}
	}
	return lo, nil
}

// missing reports sequences from to to that the stream no longer holds.
func (r *run) missing(from, to uint64, before, after time.Time) error {
	r.res.Summary.Missing += to - from + 1
	return r.res.add(Finding{Kind: KindMissing, Seq: from, ToSeq: to, Before: before, After: after,
		Detail: fmt.Sprintf("%d %s the stream no longer holds (deleted or purged, or lost)", to-from+1, plural(to-from+1, "sequence"))})
}

func (r *run) copyWithoutOriginal(c copyRec, why string) error {
	f := Finding{Kind: KindCopyWithoutOriginal, Seq: c.seq, Subject: c.subject, DLQSeqs: []uint64{c.dlqSeq},
		Reason: c.reason, Cause: c.cause, Detail: why}
	if c.published != 0 {
		f.Time = time.Unix(0, c.published).UTC()
	}
	return r.res.add(f)
}

// read accounts for one read of the period.
func (r *run) read(seq uint64, at time.Time, subject string, data []byte) error {
	s := &r.res.Summary
	s.Reads++
	key := ""
	if rd, err := meter.Decode(data); err == nil {
		key = rd.IdempotencyKey
	}
	var mine, marks []copyRec
	for {
		c, ok := r.copies.peek()
		if !ok {
			break
		}
		cr := decodeCopy(c)
		if cr.seq > seq {
			break
		}
		r.copies.next()
		switch {
		case cr.mark != "" && (cr.seq < seq || cr.published != 0 && cr.published != at.UnixNano()):
			// A mark of a read the stream no longer holds: nothing to
			// account for.
		case cr.mark != "":
			marks = append(marks, cr)
		case cr.seq < seq:
			if err := r.copyWithoutOriginal(cr, "the stream does not hold that sequence"); err != nil {
				return err
			}
		case cr.published == 0 || cr.published == at.UnixNano():
			mine = append(mine, cr)
		default:
			if err := r.copyWithoutOriginal(cr, fmt.Sprintf("the sequence holds another read, stored at %s", stamp(at))); err != nil {
				return err
			}
		}
	}
	if r.copies.err != nil {
		return r.copies.err
	}
	out := outBilled
	switch {
	case len(mine) == 0 && len(marks) > 0:
		// Its copy was replayed or purged: the last act on it says which.
		out = outMarked
		m := marks[len(marks)-1]
		md := Marked{Seq: seq, Subject: subject, Key: key, Time: at.UTC(), Mark: string(m.mark), DLQSeq: m.copySeq,
			MarkSeq: m.dlqSeq, ReplayedAs: m.as, By: m.by, Why: m.why}
		if m.at != 0 {
			md.At = time.Unix(0, m.at).UTC()
		}
		if m.mark == dlq.MarkReplayed {
			s.Replayed++
		} else {
			s.Purged++
		}
		if err := r.res.marked(md); err != nil {
			return err
		}
	case len(mine) > 0:
		out = outDeadLettered
		s.DeadLettered++
		c := mine[0]
		s.countCopy(c.reason, c.cause)
		if err := r.res.deadLettered(DeadLettered{Seq: seq, Subject: subject, Key: key, Time: at.UTC(), DLQSeq: c.dlqSeq, Reason: c.reason, Cause: c.cause}); err != nil {
			return err
		}
		if len(mine) > 1 {
			f := Finding{Kind: KindDuplicateCopies, Seq: seq, Subject: subject, Key: key, Time: at.UTC(),
				Detail: fmt.Sprintf("%d dead-letter copies of one read", len(mine))}
			for _, c := range mine {
				f.DLQSeqs = append(f.DLQSeqs, c.dlqSeq)
			}
			if err := r.res.add(f); err != nil {
				return err
			}
		}
	case seq <= r.ackFloor:
		s.Acked++
		s.Billed++
	default:
		out = outUnsettled
		s.Unsettled++
		if s.OldestUnsettled == nil {
			s.OldestUnsettled = &Oldest{Seq: seq, Time: at.UTC()}
		}
		if err := r.res.add(Finding{Kind: KindUnsettled, Seq: seq, Subject: subject, Key: key, Time: at.UTC(),
			Detail: fmt.Sprintf("above the ack floor %d of %s, no dead-letter copy: in flight, held or pending", r.ackFloor, r.a.Durable)}); err != nil {
			return err
		}
	}
	if r.keys == nil {
		return nil
	}
	if key == "" {
		if out != outBilled {
			return nil
		}
		// No key, so not in the ledger: acked, not billed, counted as a
		// keyed read missing from the ledger is (matchLedger).
		r.keyless++
		s.Billed--
		return r.res.add(Finding{Kind: KindNotInLedger, Seq: seq, Subject: subject, Time: at.UTC(),
			Detail: "settled without a dead-letter copy, but the payload is not a valid read: it has no key"})
	}
	val := append([]byte{out}, binary.BigEndian.AppendUint64(nil, seq)...)
	val = binary.BigEndian.AppendUint64(val, uint64(at.UnixNano()))
	return r.keys.add([]byte(key), append(val, subject...))
}

// matchLedger merges the period's keys with the engine's ledger, both
// sorted by key.
func (r *run) matchLedger(l Ledger, mem int) error {
	led := newSorter(r.a.TempDir, mem)
	defer led.close()
	if err := readLedger(l, led); err != nil {
		return err
	}
	s := &r.res.Summary
	s.Ledger = &LedgerSummary{Name: l.Name, Entries: led.n, NotBilled: r.keyless}
	li, err := led.iterator()
	if err != nil {
		return err
	}
	ki, err := r.keys.iterator()
	if err != nil {
		return err
	}
	for {
		lr, lok := li.peek()
		kr, kok := ki.peek()
		if !lok && !kok {
			break
		}
		var key []byte
		switch {
		case !kok || lok && bytes.Compare(lr.key, kr.key) < 0:
			key = lr.key
		default:
			key = kr.key
		}
		// The ledger's entries of key first: how many, and where.
		var lines []uint64
		n := 0
		for lr, lok = li.peek(); lok && bytes.Equal(lr.key, key); lr, lok = li.peek() {
			li.next()
			n++
			if len(lines) < maxLines {
				lines = append(lines, binary.BigEndian.Uint64(lr.val))
			}
		}
		if n > 0 {
			s.Ledger.Keys++
		}
		if n > 1 {
			s.Ledger.Repeated++
			if err := r.res.add(Finding{Kind: KindBilledTwice, Key: string(key), Lines: lines, Count: n,
				Detail: fmt.Sprintf("the engine's ledger holds this key %d times", n)}); err != nil {
				return err
			}
		}
		reads := 0
		for kr, kok = ki.peek(); kok && bytes.Equal(kr.key, key); kr, kok = ki.peek() {
			ki.next()
			reads++
			out, seq := kr.val[0], binary.BigEndian.Uint64(kr.val[1:])
			at := time.Unix(0, int64(binary.BigEndian.Uint64(kr.val[9:]))).UTC()
			if out == outBilled && n == 0 {
				s.Ledger.NotBilled++
				s.Billed-- // acked, but not billed: the ledger says what billed is
				if err := r.res.add(Finding{Kind: KindNotInLedger, Seq: seq, Subject: string(kr.val[17:]), Key: string(key), Time: at,
					Detail: "settled without a dead-letter copy, but the engine's ledger does not have its key: acked without being billed"}); err != nil {
					return err
				}
			}
		}
		if n > 0 && reads == 0 {
			s.Ledger.Unknown++
			if err := r.res.add(Finding{Kind: KindUnknownKey, Key: string(key), Lines: lines, Count: n,
				Detail: "the engine billed this key; no read of the period carries it"}); err != nil {
				return err
			}
		}
	}
	if li.err != nil {
		return li.err
	}
	return ki.err
}

var _ io.Closer = (*Result)(nil)

func plural(n uint64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
