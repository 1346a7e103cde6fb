package dlqops

import (
	"context"
	"fmt"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/jstool"
)

// purged is what Purge keeps of a selected copy: what its mark needs, never
// its payload.
type purged struct {
	seq    uint64
	prefix string // "" when the copy cannot be marked
	kept   error  // why it is not deleted; nil: mark it, then delete it
	mark   dlq.Mark
}

// Purge deletes the copies f selects, one by one by sequence, after
// confirm(n) returned true for the n selected; copies dead-lettered after
// the selection are never touched. Before it deletes a copy it marks it
// purged (a dlq.Mark in the dead-letter stream, by Ops.Actor, with why);
// a copy whose mark was not confirmed is kept, said in a line, and the
// purge returns an error once it has gone through the rest. It returns how
// many it deleted. A false confirm deletes nothing and is not an error; a
// nil confirm is.
func (o *Ops) Purge(ctx context.Context, f Filter, why string, confirm func(n int) bool) (int, error) {
	if confirm == nil {
		return 0, fmt.Errorf("%w: purge needs a confirmation", ErrInvalid)
	}
	if err := f.validate(); err != nil {
		return 0, err
	}
	st, err := o.dlqStream(ctx)
	if err != nil {
		return 0, err
	}
	var sel []purged
	err = o.scan(ctx, st, f, scanOptions{headersOnly: f.Meter == ""}, func(e Entry) error {
		p := purged{seq: e.Seq, mark: markOf(e, dlq.MarkPurged)}
		p.mark.Why = why
		var ok bool
		if p.prefix, ok = e.prefix(); !ok {
			p.prefix, p.kept = "", errUnmarkable(e)
		}
		sel = append(sel, p)
		return nil
	})
	if err != nil {
		return 0, err
	}
	w := o.out()
	if len(sel) == 0 {
		fmt.Fprintf(w, "no dead-lettered reads in %s match\n", o.Stream)
		return 0, nil
	}
	if !confirm(len(sel)) {
		fmt.Fprintln(w, "purge cancelled, nothing deleted")
		return 0, nil
	}
	n, kept := 0, 0
	for _, p := range sel {
		if p.kept == nil {
			if err := o.mark(ctx, p.prefix, p.mark); err != nil {
				p.kept = fmt.Errorf("its mark was not stored: %w", err)
				if ctx.Err() != nil || jstool.Unreachable(err) {
					fmt.Fprintf(w, "deleted %d of %d dead-lettered reads from %s\n", n, len(sel), o.Stream)
					return n, jstool.Wrap(fmt.Sprintf("purge %s: seq %d not deleted", o.Stream, p.seq), p.kept)
				}
			}
		}
		if p.kept != nil {
			kept++
			fmt.Fprintf(w, "seq %d: not deleted, copy kept: %v\n", p.seq, p.kept)
			continue
		}
		deleted, err := deleteCopy(ctx, st, p.seq)
		if err != nil {
			fmt.Fprintf(w, "deleted %d of %d dead-lettered reads from %s\n", n, len(sel), o.Stream)
			return n, jstool.Wrap("purge "+o.Stream, err)
		}
		if deleted {
			n++
		}
	}
	fmt.Fprintf(w, "deleted %d dead-lettered reads from %s\n", n, o.Stream)
	if kept > 0 {
		return n, fmt.Errorf("purge %s: %d selected reads not deleted, their copies kept (see above)", o.Stream, kept)
	}
	return n, nil
}
