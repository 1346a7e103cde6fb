package dlq

import (
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
	// ReasonExhausted: the read spent its attempt budget on transient failures.
	ReasonExhausted Reason = "exhausted"
)

// Reasons lists every reason, for metric initialisation.
func Reasons() []Reason { return []Reason{ReasonPermanent, ReasonExhausted} }

// Header names added to a dead-letter copy.
const (
	HeaderReason         = "Dlq-Reason"
	HeaderCause          = "Dlq-Cause"
	HeaderError          = "Dlq-Error"
	HeaderStream         = "Dlq-Stream"
	HeaderConsumer       = "Dlq-Consumer"
	HeaderSubject        = "Dlq-Subject"
	HeaderSequence       = "Dlq-Sequence"
	HeaderDeliveries     = "Dlq-Deliveries"
	HeaderPublishedAt    = "Dlq-Published-At"
	HeaderDeadLetteredAt = "Dlq-Dead-Lettered-At"
	HeaderOriginalMsgID  = "Dlq-Original-Msg-Id"
)

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
	PublishedAt time.Time // the original message's stream timestamp

	Header nats.Header // the original headers (not modified)
	Data   []byte      // the original payload (not modified)
}

// Subject returns the dead-letter subject of an original subject.
func Subject(prefix, original string) string { return prefix + "." + original }

// MsgID returns the message id that makes a copy idempotent.
func MsgID(stream string, seq uint64) string {
	return "dlq:" + stream + ":" + strconv.FormatUint(seq, 10)
}

// Build returns the dead-letter message for e, stamped as dead-lettered at now.
func Build(prefix string, e Entry, now time.Time) *nats.Msg {
	h := make(nats.Header, len(e.Header)+12)
	for k, v := range e.Header {
		if dropped(k) {
			continue
		}
		if k == nats.MsgIdHdr {
			h[HeaderOriginalMsgID] = append([]string(nil), v...)
			continue
		}
		h[k] = append([]string(nil), v...)
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
	set(HeaderPublishedAt, e.PublishedAt.UTC().Format(time.RFC3339Nano))
	set(HeaderDeadLetteredAt, now.UTC().Format(time.RFC3339Nano))
	set(nats.MsgIdHdr, MsgID(e.Stream, e.Sequence))
	return &nats.Msg{Subject: Subject(prefix, e.Subject), Header: h, Data: e.Data}
}

// dropped reports headers that would change how the dead-letter stream
// treats the copy: expectations, per-message TTL, rollups and schedules.
func dropped(k string) bool {
	return strings.HasPrefix(k, "Nats-Expected-") || k == "Nats-TTL" ||
		k == "Nats-Rollup" || strings.HasPrefix(k, "Nats-Schedule")
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
