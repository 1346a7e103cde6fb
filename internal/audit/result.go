package audit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is what the audit counted.
type Summary struct {
	Stream    string `json:"stream"`
	DLQStream string `json:"dlq_stream"`
	Durable   string `json:"durable"`
	Period    string `json:"period"`
	// The source stream's state and the durable's ack floor, as found
	// when the audit began.
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	FirstTime time.Time `json:"first_time,omitzero"`
	LastTime  time.Time `json:"last_time,omitzero"`
	AckFloor  uint64    `json:"ack_floor"`

	Reads uint64 `json:"reads"` // held by the stream in the period
	// Acked counts the reads settled at or below the ack floor with no
	// dead-letter copy and no mark: the service acks a read only on the
	// engine's 2xx. Billed is Acked less those the engine's ledger lacks,
	// when one is given; without one it is Acked, inferred (BilledBasis).
	Acked         uint64        `json:"acked"`
	Billed        uint64        `json:"billed"`
	BilledBasis   string        `json:"billed_basis"`
	DeadLettered  uint64        `json:"dead_lettered"`
	ByReasonCause []ReasonCause `json:"by_reason_cause"`
	// Replayed and Purged count the reads whose copy a person replayed
	// (the read lives on as a new read, ReplayedAs in Marked) or purged:
	// their marks in the dead-letter stream say so. Neither is billed.
	Replayed        uint64  `json:"replayed"`
	Purged          uint64  `json:"purged"`
	Unsettled       uint64  `json:"unsettled"`
	OldestUnsettled *Oldest `json:"oldest_unsettled,omitempty"`
	Missing         uint64  `json:"missing"`  // sequences, in the missing ranges
	AgedOut         uint64  `json:"aged_out"` // sequences before the stream's first
	// EarlierCopies counts the dead-letter copies of reads stored before
	// the source stream was (re-)created: not of this stream's reads.
	EarlierCopies int            `json:"earlier_copies"`
	Ledger        *LedgerSummary `json:"ledger,omitempty"`
	Findings      map[Kind]int   `json:"findings"`
	// Spilled counts the sorted runs the copies took on disk.
	Spilled int `json:"-"`
}

// What "billed" rests on (Summary.BilledBasis).
const (
	// BasisLedger: the engine's ledger holds the read's key.
	BasisLedger = "ledger"
	// BasisAckFloor: inferred from the durable's ack floor: a read at or
	// below it, with no copy and no mark, was acked, and the service acks
	// only on a 2xx. The inference assumes the durable delivers every read
	// of the stream (deliver policy all, a filter covering the stream's
	// subjects), which the service checks at start.
	BasisAckFloor = "ack_floor"
)

// Marked is a read of the period whose copy a person replayed or purged,
// as the mark left in the dead-letter stream says.
type Marked struct {
	Seq        uint64    `json:"seq"`
	Subject    string    `json:"subject"`
	Key        string    `json:"key,omitempty"`
	Time       time.Time `json:"time"`
	Mark       string    `json:"mark"`                  // replayed or purged
	DLQSeq     uint64    `json:"dlq_seq"`               // the copy's sequence, before it was deleted
	MarkSeq    uint64    `json:"mark_seq"`              // the mark's
	ReplayedAs uint64    `json:"replayed_as,omitempty"` // the replay's sequence in the source stream
	By         string    `json:"by,omitempty"`
	At         time.Time `json:"at,omitzero"`
	Why        string    `json:"why,omitempty"`
}

// ReasonCause counts the dead-lettered reads of one reason and cause.
type ReasonCause struct {
	Reason string `json:"reason"`
	Cause  string `json:"cause"`
	Count  uint64 `json:"count"`
}

// Oldest is the oldest read not yet settled.
type Oldest struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// LedgerSummary is what the engine's ledger held, against the period.
type LedgerSummary struct {
	Name      string `json:"name"`
	Entries   uint64 `json:"entries"`    // keys, with repeats
	Keys      uint64 `json:"keys"`       // distinct keys
	NotBilled uint64 `json:"not_billed"` // billed reads whose key it lacks
	Unknown   uint64 `json:"unknown"`    // its keys no read carries
	Repeated  uint64 `json:"repeated"`   // its keys held more than once
}

func (s *Summary) countCopy(reason, cause string) {
	i := slices.IndexFunc(s.ByReasonCause, func(rc ReasonCause) bool { return rc.Reason == reason && rc.Cause == cause })
	if i < 0 {
		s.ByReasonCause = append(s.ByReasonCause, ReasonCause{Reason: reason, Cause: cause})
		i = len(s.ByReasonCause) - 1
	}
	s.ByReasonCause[i].Count++
}

// Result is an audit's summary and its findings, kept in temporary files
// until written. Close removes them.
type Result struct {
	Summary  Summary
	findings *spill
	dead     *spill
	marks    *spill
}

func newResult(dir string) (*Result, error) {
	f, err := newSpill(dir, "findings")
	if err != nil {
		return nil, err
	}
	d, err := newSpill(dir, "dead-lettered")
	if err != nil {
		f.close()
		return nil, err
	}
	m, err := newSpill(dir, "marked")
	if err != nil {
		f.close()
		d.close()
		return nil, err
	}
	r := &Result{findings: f, dead: d, marks: m}
	r.Summary.Findings = map[Kind]int{}
	for _, k := range Kinds() {
		r.Summary.Findings[k] = 0
	}
	return r, nil
}

func (r *Result) add(f Finding) error {
	r.Summary.Findings[f.Kind]++
	return r.findings.add(f)
}

func (r *Result) deadLettered(d DeadLettered) error { return r.dead.add(d) }

func (r *Result) marked(m Marked) error { return r.marks.add(m) }

// Marked calls fn with every replayed or purged read, in sequence order.
func (r *Result) Marked(fn func(Marked) error) error {
	return r.marks.each(func(b []byte) error {
		var m Marked
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		return fn(m)
	})
}

func (r *Result) finish() error {
	slices.SortFunc(r.Summary.ByReasonCause, func(a, b ReasonCause) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Cause, b.Cause))
	})
	return nil
}

// Close removes the temporary files.
func (r *Result) Close() error {
	r.findings.close()
	r.dead.close()
	r.marks.close()
	return nil
}

// FindingCount is the number of findings.
func (r *Result) FindingCount() int { return r.findings.n }

// Explained reports whether every read of the period is explained: no
// finding at all.
func (r *Result) Explained() bool { return r.findings.n == 0 }

// Findings calls fn with every finding, in the order found.
func (r *Result) Findings(fn func(Finding) error) error {
	return r.findings.each(func(b []byte) error {
		var f Finding
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		return fn(f)
	})
}

// WriteJSON writes the report as one JSON object: "summary", "findings",
// "dead_lettered" (every dead-lettered read of the period with its copy's
// sequence) and "marked" (every replayed or purged read, with who, when,
// why and the replay's sequence), streamed from the temporary files.
func (r *Result) WriteJSON(w io.Writer) error {
	s := r.Summary
	if s.ByReasonCause == nil {
		s.ByReasonCause = []ReasonCause{} // [] for none, as the lists below
	}
	sum, err := json.Marshal(s)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, `{"explained":%t,"summary":%s,"findings":[`, r.Explained(), sum)
	if err := r.rawList(w, r.findings); err != nil {
		return err
	}
	fmt.Fprint(w, `],"dead_lettered":[`)
	if err := r.rawList(w, r.dead); err != nil {
		return err
	}
	fmt.Fprint(w, `],"marked":[`)
	if err := r.rawList(w, r.marks); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, "]}")
	return err
}

func (r *Result) rawList(w io.Writer, s *spill) error {
	first := true
	return s.each(func(b []byte) error {
		if !first {
			if _, err := w.Write([]byte{','}); err != nil {
				return err
			}
		}
		first = false
		_, err := w.Write(b)
		return err
	})
}

// WriteText writes the report a person reads: the period, the stream,
// the counts per outcome, then every finding, one a line.
func (r *Result) WriteText(w io.Writer) error {
	s := r.Summary
	fmt.Fprintf(w, "audit of %s, %s\n", s.Stream, s.Period)
	fmt.Fprintf(w, "stream %s: sequences %d to %d", s.Stream, s.FirstSeq, s.LastSeq)
	if !s.FirstTime.IsZero() {
		fmt.Fprintf(w, " (%s to %s)", stamp(s.FirstTime), stamp(s.LastTime))
	}
	fmt.Fprintf(w, "; durable %s: ack floor %d; dead-letter stream %s\n\n", s.Durable, s.AckFloor, s.DLQStream)

	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "reads in the period\t%d\n", s.Reads)
	if s.BilledBasis == BasisLedger {
		fmt.Fprintf(tw, "billed\t%d\tin the engine's ledger (of %d acked: settled at or below the ack floor, no copy, no mark)\n", s.Billed, s.Acked)
	} else {
		fmt.Fprintf(tw, "billed\t%d\tinferred: settled at or below the ack floor, no copy, no mark (assumes deliver policy all and a filter covering the stream; give --engine-ledger to check)\n", s.Billed)
	}
	fmt.Fprintf(tw, "dead-lettered\t%d\twith a copy in %s\n", s.DeadLettered, s.DLQStream)
	if s.Replayed > 0 || s.Purged > 0 {
		fmt.Fprintf(tw, "replayed\t%d\tcopy replayed as a new read (listed below), not billed as this one\n", s.Replayed)
		fmt.Fprintf(tw, "purged\t%d\tcopy purged by a person (listed below), not billed\n", s.Purged)
	}
	unsettled := ""
	if o := s.OldestUnsettled; o != nil {
		unsettled = fmt.Sprintf("oldest: seq %d at %s", o.Seq, stamp(o.Time))
	}
	fmt.Fprintf(tw, "not yet settled\t%d\t%s\n", s.Unsettled, unsettled)
	ranges := "ranges"
	if s.Findings[KindMissing] == 1 {
		ranges = "range"
	}
	fmt.Fprintf(tw, "missing\t%d\tsequences the stream no longer holds, in %d %s\n", s.Missing, s.Findings[KindMissing], ranges)
	if s.Findings[KindAgedOut] > 0 {
		fmt.Fprintf(tw, "aged out\t%d\tsequences before the stream's first; see the finding\n", s.AgedOut)
	}
	if s.EarlierCopies > 0 {
		fmt.Fprintf(tw, "earlier copies\t%d\tcopies of reads from before the stream was created, ignored\n", s.EarlierCopies)
	}
	if l := s.Ledger; l != nil {
		fmt.Fprintf(tw, "engine ledger\t%d\tkeys (%d distinct) in %s\n", l.Entries, l.Keys, l.Name)
		fmt.Fprintf(tw, "  acked, not in the ledger\t%d\n", l.NotBilled)
		fmt.Fprintf(tw, "  in the ledger, no read\t%d\n", l.Unknown)
		fmt.Fprintf(tw, "  in the ledger twice or more\t%d\n", l.Repeated)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.ByReasonCause) > 0 {
		fmt.Fprintln(tw, "\nREASON\tCAUSE\tDEAD-LETTERED")
		for _, rc := range s.ByReasonCause {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", orDash(rc.Reason), orDash(rc.Cause), rc.Count)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.marks.n > 0 {
		fmt.Fprintln(tw, "\nSEQ\tMARK\tAS\tBY\tAT\tWHY")
		if err := r.Marked(func(m Marked) error {
			as := "-"
			if m.ReplayedAs > 0 {
				as = fmt.Sprintf("seq %d", m.ReplayedAs)
			}
			_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.Seq, m.Mark, as, orDash(m.By), timeOrDash(m.At), orDash(m.Why))
			return err
		}); err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Explained() {
		_, err := fmt.Fprintln(w, "\nevery read of the period is explained")
		return err
	}
	fmt.Fprintf(w, "\nFINDINGS (%d)\n", r.findings.n)
	fmt.Fprintln(tw, "KIND\tSEQ\tSUBJECT\tKEY\tDETAIL")
	if err := r.Findings(func(f Finding) error {
		_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Kind, seqText(f), orDash(f.Subject), orDash(f.Key), detailText(f))
		return err
	}); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var parts []string
	for _, k := range Kinds() {
		if n := s.Findings[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	_, err := fmt.Fprintf(w, "\nnot every read is explained: %s\n", strings.Join(parts, ", "))
	return err
}

func seqText(f Finding) string {
	switch {
	case f.Kind == KindAgedOut && f.Seq == 0:
		return fmt.Sprintf("..%d", f.ToSeq)
	case f.ToSeq != 0 && f.ToSeq != f.Seq:
		return fmt.Sprintf("%d-%d", f.Seq, f.ToSeq)
	case f.ToSeq != 0 || f.Seq != 0:
		return fmt.Sprint(f.Seq)
	}
	return "-"
}

func detailText(f Finding) string {
	d := f.Detail
	if len(f.DLQSeqs) > 0 {
		var ss []string
		for _, s := range f.DLQSeqs {
			ss = append(ss, fmt.Sprint(s))
		}
		d += "; dead-letter seq " + strings.Join(ss, ", ")
	}
	if f.Reason != "" {
		d += fmt.Sprintf(" (%s/%s)", f.Reason, f.Cause)
	}
	if f.Kind == KindMissing {
		d += "; between " + timeOrDash(f.Before) + " and " + timeOrDash(f.After)
	}
	if len(f.Lines) > 0 {
		var ss []string
		for _, l := range f.Lines {
			ss = append(ss, fmt.Sprint(l))
		}
		d += "; ledger line " + strings.Join(ss, ", ")
	}
	return d
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return stamp(t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
