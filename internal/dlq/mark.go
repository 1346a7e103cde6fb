package dlq

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A mark records, in the dead-letter stream, what a person did to a copy
// before it was deleted: replayed it (the read lives on as a new read of
// the source stream) or purged it (by whom, when, why). The copy goes; the
// mark stays, so that the audit can tell a replayed or purged read from a
// billed one: an original below the durable's ack floor with no copy is
// billed only when no mark names it. A mark is not a copy: the dead-letter
// tools and metrics leave marks out.
type Mark struct {
	Kind MarkKind
	// The read the copy was of: its stream, sequence, stream timestamp and
	// subject, as the copy named them (Dlq-Stream, Dlq-Sequence,
	// Dlq-Published-At, Dlq-Subject).
	Stream      string
	Sequence    uint64
	PublishedAt time.Time
	Subject     string
	// CopySequence is the copy's sequence in the dead-letter stream.
	CopySequence uint64
	// ReplayedAs is the replay's sequence in the source stream (a replay
	// only).
	ReplayedAs uint64
	By         string    // who: the operator's name as the tool was told it
	At         time.Time // when
	Why        string    // why (a purge's reason as given; "" if none)
}

// MarkKind is what was done to a copy.
type MarkKind string

// The kinds of mark.
const (
	MarkReplayed MarkKind = "replayed"
	MarkPurged   MarkKind = "purged"
)

// Mark headers, beside Dlq-Stream, Dlq-Sequence, Dlq-Published-At and
// Dlq-Subject, which name the read as on a copy.
const (
	HeaderMark         = "Dlq-Mark" // replayed or purged: set on a mark only
	HeaderCopySequence = "Dlq-Copy-Sequence"
	HeaderReplayedAs   = "Dlq-Replayed-As"
	HeaderMarkedBy     = "Dlq-Marked-By"
	HeaderMarkedAt     = "Dlq-Marked-At"
	HeaderWhy          = "Dlq-Why"
)

// MarkToken is the subject token between the prefix and the original
// subject on a mark: <prefix>._mark.<original subject>, inside the
// dead-letter stream's subjects, and apart from the copies' (an original
// subject never starts with it), so that a user may publish marks without
// being able to publish copies.
const MarkToken = "_mark"

// MarkSubject returns the subject of a mark of a copy of a read published
// on original.
func MarkSubject(prefix, original string) string { return prefix + "." + MarkToken + "." + original }

// IsMark reports whether a message of the dead-letter stream with headers
// h is a mark, not a copy.
func IsMark(h nats.Header) bool { return h != nil && h.Get(HeaderMark) != "" }

// BuildMark returns the message of m, to publish under prefix. Its message
// id makes a retried mark a duplicate: one mark per act on one copy.
func BuildMark(prefix string, m Mark) *nats.Msg {
	h := nats.Header{}
	set := func(k, v string) { h[k] = []string{v} }
	set(HeaderMark, string(m.Kind))
	set(HeaderStream, m.Stream)
	set(HeaderSequence, strconv.FormatUint(m.Sequence, 10))
	if !m.PublishedAt.IsZero() {
		set(HeaderPublishedAt, m.PublishedAt.UTC().Format(TimeFormat))
	}
	set(HeaderSubject, m.Subject)
	set(HeaderCopySequence, strconv.FormatUint(m.CopySequence, 10))
	if m.ReplayedAs > 0 {
		set(HeaderReplayedAs, strconv.FormatUint(m.ReplayedAs, 10))
	}
	set(HeaderMarkedBy, OneLine(m.By, 256))
	set(HeaderMarkedAt, m.At.UTC().Format(TimeFormat))
	if m.Why != "" {
		set(HeaderWhy, OneLine(m.Why, MaxErrorLen))
	}
	set(nats.MsgIdHdr, "mark:"+string(m.Kind)+":"+m.Stream+":"+strconv.FormatUint(m.CopySequence, 10))
	return &nats.Msg{Subject: MarkSubject(prefix, m.Subject), Header: h}
}

// ParseMark returns the mark a message's headers hold; ok is false for a
// copy.
func ParseMark(h nats.Header) (m Mark, ok bool) {
	if !IsMark(h) {
		return Mark{}, false
	}
	m.Kind = MarkKind(h.Get(HeaderMark))
	m.Stream, m.Subject = h.Get(HeaderStream), h.Get(HeaderSubject)
	m.Sequence, _ = strconv.ParseUint(h.Get(HeaderSequence), 10, 64)
	m.PublishedAt, _ = time.Parse(time.RFC3339Nano, h.Get(HeaderPublishedAt))
	m.CopySequence, _ = strconv.ParseUint(h.Get(HeaderCopySequence), 10, 64)
	m.ReplayedAs, _ = strconv.ParseUint(h.Get(HeaderReplayedAs), 10, 64)
	m.By, m.Why = h.Get(HeaderMarkedBy), h.Get(HeaderWhy)
	m.At, _ = time.Parse(time.RFC3339Nano, h.Get(HeaderMarkedAt))
	return m, true
}
