package dlqops

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"
)

// Stats is what Stats counts.
type Stats struct {
	Stream        string         `json:"stream"`
	Total         int            `json:"total"`
	ByReason      map[string]int `json:"by_reason"`
	ByCause       map[string]int `json:"by_cause"`
	ByReasonCause []ReasonCause  `json:"by_reason_cause"`
	Oldest        time.Time      `json:"oldest,omitzero"` // earliest Dlq-Dead-Lettered-At
	Newest        time.Time      `json:"newest,omitzero"` // latest Dlq-Dead-Lettered-At
}

// ReasonCause counts one reason and cause pair.
type ReasonCause struct {
	Reason string `json:"reason"`
	Cause  string `json:"cause"`
	Count  int    `json:"count"`
}

// Stats writes counts of the copies f selects by reason, by cause and by
// both, their total, and the oldest and newest dead-letter times; with
// jsonOut, as one JSON object.
func (o *Ops) Stats(ctx context.Context, f Filter, jsonOut bool) error {
	s, err := o.CollectStats(ctx, f)
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(o.out()).Encode(s)
	}
	return o.writeStats(s)
}

// CollectStats counts the copies f selects.
func (o *Ops) CollectStats(ctx context.Context, f Filter) (Stats, error) {
	if err := f.validate(); err != nil {
		return Stats{}, err
	}
	st, err := o.dlqStream(ctx)
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Stream: o.Stream, ByReason: map[string]int{}, ByCause: map[string]int{}}
	pairs := map[[2]string]int{}
	// Without a meter filter, headers are enough: the payloads stay on the server.
	so := scanOptions{headersOnly: f.Meter == ""}
	err = o.scan(ctx, st, f, so, func(e Entry) error {
		s.Total++
		s.ByReason[orDash(e.Reason)]++
		s.ByCause[orDash(e.Cause)]++
		pairs[[2]string{orDash(e.Reason), orDash(e.Cause)}]++
		if t := e.DeadLetteredAt; !t.IsZero() {
			if s.Oldest.IsZero() || t.Before(s.Oldest) {
				s.Oldest = t
			}
			if t.After(s.Newest) {
				s.Newest = t
			}
		}
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	s.ByReasonCause = make([]ReasonCause, 0, len(pairs))
	for k, n := range pairs {
		s.ByReasonCause = append(s.ByReasonCause, ReasonCause{Reason: k[0], Cause: k[1], Count: n})
	}
	slices.SortFunc(s.ByReasonCause, func(a, b ReasonCause) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Cause, b.Cause))
	})
	return s, nil
}

func (o *Ops) writeStats(s Stats) error {
	w := o.out()
	if s.Total == 0 {
		_, err := fmt.Fprintf(w, "no dead-lettered reads in %s match\n", s.Stream)
		return err
	}
	now := o.now()
	fmt.Fprintf(w, "%d dead-lettered reads in %s\n", s.Total, s.Stream)
	if !s.Oldest.IsZero() {
		fmt.Fprintf(w, "oldest %s (%s ago)\nnewest %s (%s ago)\n",
			stamp(s.Oldest), age(now.Sub(s.Oldest)), stamp(s.Newest), age(now.Sub(s.Newest)))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nREASON\tCOUNT")
	for _, k := range byCount(s.ByReason) {
		fmt.Fprintf(tw, "%s\t%d\n", k, s.ByReason[k])
	}
	fmt.Fprintln(tw, "\nCAUSE\tCOUNT")
	for _, k := range byCount(s.ByCause) {
		fmt.Fprintf(tw, "%s\t%d\n", k, s.ByCause[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(tw, "\nREASON\tCAUSE\tCOUNT")
	for _, p := range s.ByReasonCause {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", p.Reason, p.Cause, p.Count)
	}
	return tw.Flush()
}

// byCount returns the keys of m, largest count first, then by name.
func byCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	return keys
}
