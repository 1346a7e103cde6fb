package dlqops

import (
	"context"
	"fmt"
)

// Purge deletes the copies f selects, one by one by sequence, after
// confirm(n) returned true for the n selected; copies dead-lettered after
// the selection are never touched. It returns how many it deleted. A false
// confirm deletes nothing and is not an error; a nil confirm is.
func (o *Ops) Purge(ctx context.Context, f Filter, confirm func(n int) bool) (int, error) {
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
	var seqs []uint64
	err = o.scan(ctx, st, f, scanOptions{headersOnly: f.Meter == ""}, func(e Entry) error {
		seqs = append(seqs, e.Seq)
		return nil
	})
	if err != nil {
		return 0, err
	}
	w := o.out()
	if len(seqs) == 0 {
		fmt.Fprintf(w, "no dead-lettered reads in %s match\n", o.Stream)
		return 0, nil
	}
	if !confirm(len(seqs)) {
		fmt.Fprintln(w, "purge cancelled, nothing deleted")
		return 0, nil
	}
	n := 0
	for _, seq := range seqs {
		deleted, err := deleteCopy(ctx, st, seq)
		if err != nil {
			fmt.Fprintf(w, "deleted %d of %d dead-lettered reads from %s\n", n, len(seqs), o.Stream)
			return n, wrapNATS("purge "+o.Stream, err)
		}
		if deleted {
			n++
		}
	}
	fmt.Fprintf(w, "deleted %d dead-lettered reads from %s\n", n, o.Stream)
	return n, nil
}
