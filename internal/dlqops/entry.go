package dlqops

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/internal/dlq"
)

// Replay headers, added to a read sent back to its original subject. They
// are kept on a later dead-letter copy, so the count accumulates.
const (
	HeaderReplayedFrom = "Dlq-Replayed-From" // the dead-letter sequence it was replayed from
	HeaderReplayCount  = "Dlq-Replay-Count"  // how many times the read was replayed
)

// Entry is one dead-letter copy, decoded.
type Entry struct {
	Seq            uint64 // dead-letter stream sequence
	CopySubject    string // the copy's own subject: <dead-letter prefix>.<original subject>
	Reason         string // Dlq-Reason
	Cause          string // Dlq-Cause
	Subject        string // the original subject (Dlq-Subject)
	MeterID        string // meter_id in the payload; "" when the payload is not JSON
	Error          string // Dlq-Error
	Deliveries     uint64 // Dlq-Deliveries
	Attempts       uint64 // Dlq-Attempts: the calls charged (absent on copies of earlier versions)
	ReplayCount    int    // Dlq-Replay-Count: replays before this copy was made
	DeadLetteredAt time.Time
	PublishedAt    time.Time
	Header         nats.Header // every header of the copy
	Data           []byte      // the original payload
}

func newEntry(seq uint64, copySubject string, h nats.Header, data []byte) Entry {
	e := Entry{
		Seq:            seq,
		CopySubject:    copySubject,
		Reason:         h.Get(dlq.HeaderReason),
		Cause:          h.Get(dlq.HeaderCause),
		Subject:        h.Get(dlq.HeaderSubject),
		Error:          h.Get(dlq.HeaderError),
		DeadLetteredAt: parseTime(h.Get(dlq.HeaderDeadLetteredAt)),
		PublishedAt:    parseTime(h.Get(dlq.HeaderPublishedAt)),
		Header:         h,
		Data:           data,
	}
	e.Deliveries, _ = strconv.ParseUint(h.Get(dlq.HeaderDeliveries), 10, 64)
	e.Attempts, _ = strconv.ParseUint(h.Get(dlq.HeaderAttempts), 10, 64)
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get(HeaderReplayCount))); err == nil && n > 0 {
		e.ReplayCount = n
	}
	var m struct {
		MeterID string `json:"meter_id"`
	}
	if json.Unmarshal(data, &m) == nil {
		e.MeterID = m.MeterID
	}
	return e
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Truncated reports a copy whose payload was cut to fit the dead-letter
// stream; the full read stays in the source stream at Dlq-Sequence.
func (e Entry) Truncated() bool { return e.Header.Get(dlq.HeaderTruncated) == "true" }
