package dlq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Found is what a look-up for a read's copy saw.
type Found struct {
	// Copy: a copy of the read is stored.
	Copy bool
	// Others counts the copies of other reads at the same stream and
	// sequence (stored before the stream was deleted and re-created), told
	// apart by their Dlq-Published-At: none is taken for the read's.
	Others int
	// Cleanup is why the look-up's consumer could not be deleted after
	// use (nil: it was); the server then removes it once idle.
	Cleanup error
}

// lookupIdle is how long a look-up's consumer outlives its last use when
// it could not be deleted.
const lookupIdle = 30 * time.Second

// deleteTimeout bounds the delete of a look-up's consumer.
const deleteTimeout = time.Second

// Stored looks for a copy of the read e names (its stream, sequence and
// stream timestamp) stored in the dead-letter stream between from and to.
// It is how a copy is found once the dead-letter stream's duplicate window
// has forgotten its message id: it reads the headers of the copies on the
// read's dead-letter subject stored in that span, so the span must be short
// (the time one dead-letter attempt can take, with a margin for clock
// skew). The consumer it reads with is deleted before it returns.
func (p *Publisher) Stored(ctx context.Context, e Entry, from, to time.Time) (Found, error) {
	st, err := p.js.Stream(ctx, p.o.Stream)
	if err != nil {
		return Found{}, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
	}
	start := from
	// A consumer of its own, not an ordered one: nats.go's ordered consumer
	// deletes and recreates itself on each fetch. This one is deleted once
	// read, and goes away on its own once idle if that fails.
	name := fmt.Sprintf("dlq-lookup-%016x", rand.Uint64())
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     Subject(p.o.Prefix, e.Subject),
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		InactiveThreshold: lookupIdle,
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return Found{}, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
	}
	found, err := scan(cons, e, to)
	// A delete the server refuses (a user without the right) goes
	// unanswered: bounded, so that the copy still has its time.
	dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	if err := st.DeleteConsumer(dctx, name); err != nil {
		found.Cleanup = fmt.Errorf("delete look-up consumer %s of %s: %w", name, p.o.Stream, err)
	}
	if err != nil {
		return found, fmt.Errorf("look for a copy in %s: %w", p.o.Stream, err)
	}
	return found, nil
}

// scan reads the copies' headers until it finds e's, or passes to.
func scan(cons jetstream.Consumer, e Entry, to time.Time) (Found, error) {
	seq := strconv.FormatUint(e.Sequence, 10)
	var found Found
	for {
		// No wait: the copies looked for are stored already. Each batch is
		// read to its end, so that no fetch outlives the look-up.
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return found, err
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			h := m.Headers()
			if h.Get(HeaderSequence) == seq && h.Get(HeaderStream) == e.Stream {
				if OfRead(h, e.PublishedAt) {
					found.Copy = true
				} else {
					found.Others++
				}
			}
			done = done || md.Timestamp.After(to) || md.NumPending == 0
		}
		if err := batch.Error(); err != nil {
			return found, err
		}
		if found.Copy || done || n == 0 {
			return found, nil
		}
	}
}

// OfRead reports whether the copy with headers h is of the read whose
// stream timestamp is publishedAt (its Dlq-Published-At; a zero
// publishedAt, not known, matches any copy).
func OfRead(h nats.Header, publishedAt time.Time) bool {
	if publishedAt.IsZero() {
		return true
	}
	at, err := time.Parse(time.RFC3339Nano, h.Get(HeaderPublishedAt))
	return err == nil && at.Equal(publishedAt)
}
