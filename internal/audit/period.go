package audit

import (
	"fmt"
	"time"
)

// Period is what an audit accounts for: the reads stored between Since
// and Until (stream timestamps, both inclusive), or the sequences FromSeq
// to ToSeq (inclusive). Exactly one of the two is set.
type Period struct {
	Since, Until   time.Time
	FromSeq, ToSeq uint64
}

// BySeq reports whether the period is a range of sequences.
func (p Period) BySeq() bool { return p.FromSeq != 0 || p.ToSeq != 0 }

// Validate names the flag of each problem.
func (p Period) Validate() error {
	byTime := !p.Since.IsZero() || !p.Until.IsZero()
	switch {
	case byTime && p.BySeq():
		return fmt.Errorf("%w period: give --since and --until, or --from-seq and --to-seq, not both", ErrInvalid)
	case p.BySeq() && (p.FromSeq == 0 || p.ToSeq == 0):
		return fmt.Errorf("%w period: --from-seq and --to-seq go together, each a sequence from 1", ErrInvalid)
	case p.BySeq() && p.FromSeq > p.ToSeq:
		return fmt.Errorf("%w period: --from-seq %d is after --to-seq %d", ErrInvalid, p.FromSeq, p.ToSeq)
	case p.BySeq():
		return nil
	case p.Since.IsZero() || p.Until.IsZero():
		return fmt.Errorf("%w period: give both --since and --until (or --from-seq and --to-seq)", ErrInvalid)
	case p.Until.Before(p.Since):
		return fmt.Errorf("%w period: --until %s is before --since %s", ErrInvalid, stamp(p.Until), stamp(p.Since))
	}
	return nil
}

func (p Period) String() string {
	if p.BySeq() {
		return fmt.Sprintf("sequences %d to %d", p.FromSeq, p.ToSeq)
	}
	return fmt.Sprintf("%s to %s (stream timestamps)", stamp(p.Since), stamp(p.Until))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
