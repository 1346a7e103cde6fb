package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Kind is what a finding says is wrong; a closed set, used in the report
// and its JSON alike.
type Kind string

const (
	// KindMissing: sequences inside the period the stream no longer holds
	// (interior deletes: purged, or lost).
	KindMissing Kind = "missing"
	// KindAgedOut: reads of the period left the stream before the audit
	// (its max age or limits, or a purge of its head).
	KindAgedOut Kind = "aged_out"
	// KindCopyWithoutOriginal: a dead-letter copy of a read of the period
	// whose read the stream no longer holds.
	KindCopyWithoutOriginal Kind = "copy_without_original"
	// KindDuplicateCopies: two or more dead-letter copies of one read.
	KindDuplicateCopies Kind = "duplicate_copies"
	// KindUnsettled: a read above the durable's ack floor with no
	// dead-letter copy: in flight, held for a retry, or pending.
	KindUnsettled Kind = "unsettled"
	// KindNotInLedger: a billed read (settled, no copy) whose key the
	// engine's ledger lacks: acked without being billed.
	KindNotInLedger Kind = "billed_not_in_ledger"
	// KindUnknownKey: a key the engine billed that no read of the period
	// carries.
	KindUnknownKey Kind = "ledger_key_unknown"
	// KindBilledTwice: a key the engine's ledger holds more than once.
	KindBilledTwice Kind = "ledger_key_repeated"
)

// Kinds lists every kind, in the order the report counts them.
func Kinds() []Kind {
	return []Kind{KindMissing, KindAgedOut, KindCopyWithoutOriginal, KindDuplicateCopies, KindUnsettled,
		KindNotInLedger, KindUnknownKey, KindBilledTwice}
}

// Finding is one read, range or key the audit cannot explain.
type Finding struct {
	Kind    Kind      `json:"kind"`
	Seq     uint64    `json:"seq,omitempty"`    // the read's sequence, or a range's first
	ToSeq   uint64    `json:"to_seq,omitempty"` // a range's last
	Subject string    `json:"subject,omitempty"`
	Key     string    `json:"key,omitempty"`      // the idempotency key
	Time    time.Time `json:"time,omitzero"`      // the read's stream timestamp
	DLQSeqs []uint64  `json:"dlq_seqs,omitempty"` // its dead-letter copies
	Reason  string    `json:"reason,omitempty"`   // a copy's Dlq-Reason
	Cause   string    `json:"cause,omitempty"`    // a copy's Dlq-Cause
	Before  time.Time `json:"before,omitzero"`    // a range's neighbour below: its stream timestamp
	After   time.Time `json:"after,omitzero"`     // a range's neighbour above
	Lines   []uint64  `json:"lines,omitempty"`    // ledger line numbers (the first few)
	Count   int       `json:"count,omitempty"`    // ledger entries of the key
	Detail  string    `json:"detail"`
}

// DeadLettered is one read of the period with its dead-letter copy.
type DeadLettered struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Key     string    `json:"key,omitempty"`
	Time    time.Time `json:"time"`
	DLQSeq  uint64    `json:"dlq_seq"`
	Reason  string    `json:"reason"`
	Cause   string    `json:"cause"`
}

// spill is a temporary file of JSON lines, read back once: how findings
// and dead-lettered reads are kept without holding them in memory.
type spill struct {
	f *os.File
	w *bufio.Writer
	n int
}

func newSpill(dir, name string) (*spill, error) {
	f, err := os.CreateTemp(dir, "meter-audit-"+name+"-*")
	if err != nil {
		return nil, fmt.Errorf("spill %s: %w", name, err)
	}
	_ = os.Remove(f.Name())
	return &spill{f: f, w: bufio.NewWriter(f)}, nil
}

func (s *spill) add(v any) error {
	s.n++
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = s.w.Write(b)
	return err
}

// each calls fn with every line added, in order.
func (s *spill) each(fn func([]byte) error) error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	defer s.f.Seek(0, io.SeekEnd)
	sc := bufio.NewScanner(s.f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (s *spill) close() { s.f.Close() }
