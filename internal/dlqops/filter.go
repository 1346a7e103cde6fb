package dlqops

import (
	"fmt"
	"strings"
	"time"
)

// Filter selects dead-lettered reads. Zero values match everything; set
// fields must all match.
type Filter struct {
	Reason  string // Dlq-Reason, exact
	Cause   string // Dlq-Cause, exact
	Subject string // the original subject (Dlq-Subject); NATS wildcards * and > allowed
	Meter   string // meter_id inside the payload, exact
	// Since and Until bound Dlq-Dead-Lettered-At, both inclusive. A copy
	// without a readable time matches only when both are zero.
	Since, Until time.Time
	Limit        int // at most this many reads (0: no limit), in sequence order
}

func (f Filter) validate() error {
	if f.Subject != "" && !validPattern(f.Subject) {
		return fmt.Errorf("%w --subject %q: want NATS subject tokens separated by '.', with * for one token or a final > for the rest", ErrInvalid, f.Subject)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return fmt.Errorf("%w --since/--until: %s is after %s", ErrInvalid,
			f.Since.UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339))
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w --limit %d: want 0 (no limit) or more", ErrInvalid, f.Limit)
	}
	return nil
}

func (f Filter) match(e Entry) bool {
	switch {
	case f.Reason != "" && e.Reason != f.Reason,
		f.Cause != "" && e.Cause != f.Cause,
		f.Meter != "" && e.MeterID != f.Meter,
		f.Subject != "" && !subjectMatch(f.Subject, e.Subject):
		return false
	}
	if f.Since.IsZero() && f.Until.IsZero() {
		return true
	}
	t := e.DeadLetteredAt
	if t.IsZero() {
		return false
	}
	return (f.Since.IsZero() || !t.Before(f.Since)) && (f.Until.IsZero() || !t.After(f.Until))
}

// validPattern reports whether p is a subject or a wildcard pattern: no
// empty tokens, no whitespace, * and > only as whole tokens, > last.
func validPattern(p string) bool {
	if strings.ContainsAny(p, " \t\r\n") {
		return false
	}
	toks := strings.Split(p, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return false
		case t == ">" && i != len(toks)-1:
			return false
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}

// subjectMatch reports whether subject matches the NATS pattern p.
func subjectMatch(p, subject string) bool {
	pt, st := strings.Split(p, "."), strings.Split(subject, ".")
	for i, t := range pt {
		if t == ">" {
			return len(st) > i
		}
		if i >= len(st) || (t != "*" && t != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// Validate reports a filter the tools cannot use, naming its flag; it
// connects to nothing, so a command line can be checked before connecting.
// List, Stats, Replay and Purge check it too.
func (f Filter) Validate() error { return f.validate() }
