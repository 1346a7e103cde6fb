package dlq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stored reports whether a copy of the read e names (its stream and
// sequence) was stored in the dead-letter stream between from and to. It
// is how a copy is found once the dead-letter stream's duplicate window has
// forgotten its message id: it reads the headers of the copies on the read's
// dead-letter subject stored in that span, so the span must be short (the
// time one dead-letter attempt can take, with a margin for clock skew).
func (p *Publisher) Stored(ctx context.Context, e Entry, from, to time.Time) (bool, error) {
	st, err := p.js.Stream(ctx, p.o.Stream)
	if err != nil {
		return false, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
	}
	start := from
	// A consumer of its own, not an ordered one: nats.go's ordered consumer
	// deletes and recreates itself on each fetch, which would ask for the
	// right to delete consumers of the dead-letter stream. This one goes
	// away on its own once idle.
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Name:              fmt.Sprintf("dlq-lookup-%016x", rand.Uint64()),
		FilterSubject:     Subject(p.o.Prefix, e.Subject),
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		InactiveThreshold: 30 * time.Second,
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return false, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
	}
	seq := strconv.FormatUint(e.Sequence, 10)
	for {
		// No wait: the copies looked for are stored already. Each batch is
		// read to its end, so that no fetch outlives the look-up.
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return false, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
		}
		n, found, done := 0, false, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			h := m.Headers()
			found = found || h.Get(HeaderSequence) == seq && h.Get(HeaderStream) == e.Stream
			done = done || md.Timestamp.After(to) || md.NumPending == 0
		}
		if err := batch.Error(); err != nil {
			return false, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
		}
		if found || done || n == 0 {
			return found, nil
		}
	}
}
