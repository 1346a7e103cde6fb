package dlqops

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/jstool"
)

// Show writes one copy in full: its subject, every header (sorted, one line
// per value) and the payload (base64 when it is not valid UTF-8). A mark is
// written the same way, under a line that says it is one.
func (o *Ops) Show(ctx context.Context, seq uint64) error {
	st, err := o.dlqStream(ctx)
	if err != nil {
		return err
	}
	m, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("sequence %d in %s: %w (see consumer dlq list): %w", seq, o.Stream, ErrNoSuchSequence, err)
	}
	if err != nil {
		return jstool.Wrap(fmt.Sprintf("get sequence %d from %s", seq, o.Stream), err)
	}
	w := o.out()
	fmt.Fprintf(w, "seq %d in %s, subject %s\n\n", m.Sequence, o.Stream, m.Subject)
	if mk, ok := dlq.ParseMark(m.Header); ok {
		fmt.Fprintf(w, "a mark, not a dead-lettered read: the copy at seq %d was %s\n\n", mk.CopySequence, mk.Kind)
	}
	keys := make([]string, 0, len(m.Header))
	for k := range m.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range m.Header[k] {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
	if e := newEntry(m.Sequence, m.Subject, m.Header, nil); e.Truncated() {
		fmt.Fprintf(w, "\npayload truncated to fit the dead-letter stream: %d of %s bytes; the full read is in stream %s at sequence %s (consumer dlq replay uses it)\n",
			len(m.Data), m.Header.Get(dlq.HeaderOriginalSize), m.Header.Get(dlq.HeaderStream), m.Header.Get(dlq.HeaderSequence))
	}
	if utf8.Valid(m.Data) {
		fmt.Fprintf(w, "\npayload (%d bytes):\n%s\n", len(m.Data), m.Data)
	} else {
		fmt.Fprintf(w, "\npayload (%d bytes, not UTF-8, base64):\n%s\n", len(m.Data), base64.StdEncoding.EncodeToString(m.Data))
	}
	return nil
}
