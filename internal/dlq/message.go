package dlq

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/internal/classify"
)

// Reason says why a read was dead-lettered. It is a closed set, used for the
// metric label and the Dlq-Reason header alike.
type Reason string

const (
	// ReasonPermanent: the read failed in a way that will never succeed.
	ReasonPermanent Reason = "permanent"
	// ReasonExhausted: the read spent its attempt limit on transient failures.
	ReasonExhausted Reason = "exhausted"
	// ReasonExpired: a transient failure came after the read's age limit
	// (retry.max_read_age) was spent: it missed its billing cycle and must
	// be estimated.
	ReasonExpired Reason = "expired"
)

// Reasons lists every reason, for metric initialisation.
func Reasons() []Reason { return []Reason{ReasonPermanent, ReasonExhausted, ReasonExpired} }

// Header names added to a dead-letter copy.
const (
	HeaderReason     = "Dlq-Reason"
	HeaderCause      = "Dlq-Cause"
	HeaderError      = "Dlq-Error"
	HeaderStream     = "Dlq-Stream"
	HeaderConsumer   = "Dlq-Consumer"
	HeaderSubject    = "Dlq-Subject"
	HeaderSequence   = "Dlq-Sequence"
	HeaderDeliveries = "Dlq-Deliveries"
	// HeaderAttempts is the attempts the read spent: the calls charged to
	// it, the last one included (0 for a read never called, such as an
	// invalid one). Its deliveries may be more: a delivery that reached no
	// call is not an attempt, unless the read had more of those than the
	// consumer credits (stream.MaxUncalled), each one past it then counting.
	HeaderAttempts       = "Dlq-Attempts"
	HeaderPublishedAt    = "Dlq-Published-At"
	HeaderDeadLetteredAt = "Dlq-Dead-Lettered-At"
	HeaderOriginalMsgID  = "Dlq-Original-Msg-Id"
	// HeaderDroppedHeaders names the original headers left off the copy
	// because the server acts on them (see ServerHeader).
	HeaderDroppedHeaders = "Dlq-Dropped-Headers"
	// HeaderTruncated is "true" on a copy whose payload was cut to fit the
	// server's limit; the full read stays in the source stream at
	// Dlq-Sequence.
	HeaderTruncated = "Dlq-Truncated"
	// HeaderOriginalSize is the original payload's size in bytes, on a
	// truncated copy.
	HeaderOriginalSize = "Dlq-Original-Size"
)

// TimeFormat is the format of Dlq-Published-At, Dlq-Dead-Lettered-At and
// the marks' times: RFC 3339 in UTC with nanoseconds, always nine digits of
// them (time.RFC3339Nano drops trailing zeros), so that every copy's times
// have one shape; time.RFC3339Nano parses it.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// MaxErrorLen bounds the Dlq-Error header, in bytes.
const MaxErrorLen = 1024

// Entry is everything a dead-letter copy records.
type Entry struct {
	Reason Reason
	Cause  classify.Cause
	Err    error

	Stream      string    // the original stream
	Consumer    string    // the durable that gave up on it
	Subject     string    // the original subject
	Sequence    uint64    // the original stream sequence
	Deliveries  uint64    // the delivery count when dead-lettered
	Attempts    uint64    // the calls charged to it (see HeaderAttempts)
	PublishedAt time.Time // the original message's stream timestamp
	// At is when the read was dead-lettered, on the NATS server's clock as
	// the decision recorded it (zero: the clock Build is given).
	At time.Time

	Header nats.Header // the original headers (not modified)
	Data   []byte      // the original payload (not modified)
}

// Subject returns the dead-letter subject of an original subject.
func Subject(prefix, original string) string { return prefix + "." + original }

// MsgID returns the message id that makes a copy idempotent:
// "dlq:<stream>:<seq>:<published>", published being the original's stream
// timestamp in Unix nanoseconds, so that a read stored at a sequence an
// earlier read had (the stream was deleted and re-created) gets a copy of
// its own. A zero publishedAt (not a delivery) leaves it off.
func MsgID(stream string, seq uint64, publishedAt time.Time) string {
	id := "dlq:" + stream + ":" + strconv.FormatUint(seq, 10)
	if publishedAt.IsZero() {
		return id
	}
	return id + ":" + strconv.FormatInt(publishedAt.UnixNano(), 10)
}

// Build returns the dead-letter message for e, stamped as dead-lettered at now.
func Build(prefix string, e Entry, now time.Time) *nats.Msg {
	h := make(nats.Header, len(e.Header)+14)
	var dropped []string
	for k, v := range e.Header {
		switch {
		case strings.EqualFold(k, nats.MsgIdHdr):
			h[HeaderOriginalMsgID] = append([]string(nil), v...)
		case ServerHeader(k):
			dropped = append(dropped, k)
		case slices.ContainsFunc(provenance, func(p string) bool { return strings.EqualFold(p, k) }):
			// The copy's own, set below: an original's, in any case, would
			// stand beside it (NATS header names are case-sensitive).
		default:
			h[k] = append([]string(nil), v...)
		}
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		h[HeaderDroppedHeaders] = []string{strings.Join(dropped, ",")}
	}
	errText := ""
	if e.Err != nil {
		errText = e.Err.Error()
	}
	set := func(k, v string) { h[k] = []string{v} }
	set(HeaderReason, string(e.Reason))
	set(HeaderCause, string(e.Cause))
	set(HeaderError, OneLine(errText, MaxErrorLen))
	set(HeaderStream, e.Stream)
	set(HeaderConsumer, e.Consumer)
	set(HeaderSubject, e.Subject)
	set(HeaderSequence, strconv.FormatUint(e.Sequence, 10))
	set(HeaderDeliveries, strconv.FormatUint(e.Deliveries, 10))
	set(HeaderAttempts, strconv.FormatUint(e.Attempts, 10))
	set(HeaderPublishedAt, e.PublishedAt.UTC().Format(TimeFormat))
	at := e.At
	if at.IsZero() {
		at = now
	}
	set(HeaderDeadLetteredAt, at.UTC().Format(TimeFormat))
	set(nats.MsgIdHdr, MsgID(e.Stream, e.Sequence, e.PublishedAt))
	return &nats.Msg{Subject: Subject(prefix, e.Subject), Header: h, Data: e.Data}
}

// provenance are the headers Build sets on every copy.
var provenance = []string{HeaderReason, HeaderCause, HeaderError, HeaderStream, HeaderConsumer, HeaderSubject, HeaderSequence,
	HeaderDeliveries, HeaderAttempts, HeaderPublishedAt, HeaderDeadLetteredAt, HeaderOriginalMsgID, HeaderDroppedHeaders}

// ServerHeader reports whether nats-server acts on header k when a message
// is published: every "Nats-" header (nats-server v2.15.2, server/stream.go:
// Nats-Msg-Id, Nats-Expected-*, Nats-Rollup, Nats-TTL, Nats-Incr,
// Nats-Batch-Id/-Sequence/-Commit, Nats-Schedule*, Nats-Required-Api-Level,
// Nats-Trace-*, ...) and KV-Operation (a PURGE value makes a delete
// marker). Such a header on a copy would make the dead-letter stream refuse
// it (a read published in an atomic batch: every time), expire it or roll
// other copies up. Matched without regard to case.
func ServerHeader(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "Nats-") || strings.EqualFold(k, "KV-Operation")
}

// headerSize is the size of h on the wire: "NATS/1.0\r\n", a
// "Key: value\r\n" line per value, and a closing "\r\n".
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// Fit cuts m's payload so that headers and payload fit in limit bytes,
// marking the copy with Dlq-Truncated and Dlq-Original-Size. It reports
// whether it cut anything; it returns ErrTooLarge when even the headers do
// not fit. A limit <= 0 means no limit.
func Fit(m *nats.Msg, limit int) (bool, error) {
	if limit <= 0 || headerSize(m.Header)+len(m.Data) <= limit {
		return false, nil
	}
	size := len(m.Data)
	m.Header[HeaderTruncated] = []string{"true"}
	m.Header[HeaderOriginalSize] = []string{strconv.Itoa(size)}
	room := limit - headerSize(m.Header)
	if room < 0 {
		return false, fmt.Errorf("%w: headers alone take %d of %d bytes", ErrTooLarge, headerSize(m.Header), limit)
	}
	m.Data = m.Data[:min(room, size):min(room, size)]
	return true, nil
}

// OneLine folds s onto one line (control characters become spaces) and cuts
// it to at most n bytes on a rune boundary, marking a cut with "...".
func OneLine(s string, n int) string {
	var b strings.Builder
	b.Grow(min(len(s), n))
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > n {
			cut := b.String()
			for len(cut) > n-3 {
				_, size := utf8.DecodeLastRuneInString(cut)
				cut = cut[:len(cut)-size]
			}
			return cut + "..."
		}
		b.WriteRune(r)
	}
	return b.String()
}
