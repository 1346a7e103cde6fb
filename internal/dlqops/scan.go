package dlqops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
)

// pageSize bounds the messages buffered by the client at once.
const pageSize = 128

// DefaultIdleWait is how long a scan waits for the next message before it
// asks the server whether any are left (they can be deleted while a scan
// runs); Ops.IdleWait overrides it.
const DefaultIdleWait = 2 * time.Second

// errEnd ends a scan early without an error.
var errEnd = errors.New("end of scan")

type scanOptions struct {
	headersOnly bool
	// progress, when set, is called with the messages examined so far
	// (marks included) and the messages the scan will examine at most.
	progress func(done, total uint64)
}

// scan calls fn with every copy f selects, in sequence order, up to the last
// message stored when the scan began (copies dead-lettered during a replay
// are left for the next run) and at most f.Limit of them. Marks
// (dlq.IsMark) are passed over: they are not copies. It reads the stream
// through an ordered consumer, pageSize messages at a time. fn may return
// errEnd to stop.
func (o *Ops) scan(ctx context.Context, st jetstream.Stream, f Filter, so scanOptions, fn func(Entry) error) error {
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil
	}
	last := state.LastSeq
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: so.headersOnly})
	if err != nil {
		return wrapNATS("read dead-letter stream "+o.Stream, err)
	}
	defer o.removeConsumer(cons)
	total := cons.CachedInfo().NumPending
	if total == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pageSize))
	if err != nil {
		return wrapNATS("read dead-letter stream "+o.Stream, err)
	}
	defer it.Stop()

	var done uint64
	selected := 0
	for {
		msg, err := next(ctx, it, cons, o.idleWait())
		if errors.Is(err, errEnd) {
			return nil
		}
		if err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read dead-letter stream %s: %w", o.Stream, err)
		}
		seq := md.Sequence.Stream
		if seq > last {
			return nil
		}
		done++
		// A mark (what a replay or purge did to a copy) is not a copy: it is
		// never shown, counted, replayed or purged.
		if h := msg.Headers(); !dlq.IsMark(h) {
			e := newEntry(seq, msg.Subject(), h, msg.Data())
			if f.match(e) {
				selected++
				err := fn(e)
				if errors.Is(err, errEnd) {
					return nil
				}
				if err != nil {
					return err
				}
				if f.Limit > 0 && selected >= f.Limit {
					return nil
				}
			}
		}
		if so.progress != nil {
			so.progress(done, total)
		}
		if md.NumPending == 0 || seq >= last {
			return nil
		}
	}
}

// next returns the next message, or errEnd when the server has none left.
func next(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer, idle time.Duration) (jetstream.Msg, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, idle)
		msg, err := it.Next(jetstream.NextContext(wctx))
		cancel()
		if err == nil {
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return nil, wrapNATS("read dead-letter stream", err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, wrapNATS("read dead-letter stream", err)
		}
		if info.NumPending == 0 {
			return nil, errEnd
		}
	}
}

// removeConsumer deletes the scan's ordered consumer at once rather than
// leaving it to the server's inactivity threshold.
func (o *Ops) removeConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || o.JS.Conn() == nil || o.JS.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = o.JS.DeleteConsumer(ctx, o.Stream, info.Name)
}
