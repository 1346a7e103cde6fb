package dlqops

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/jstool"
)

// pageSize bounds the messages buffered by the client at once.
const pageSize = 128

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
// with jstool.Walk, pageSize messages at a time; Ops.IdleWait is the walk's.
func (o *Ops) scan(ctx context.Context, st jetstream.Stream, f Filter, so scanOptions, fn func(Entry) error) error {
	selected := 0
	wo := jstool.WalkOptions{What: "dead-letter stream", HeadersOnly: so.headersOnly, PageSize: pageSize,
		IdleWait: o.IdleWait, Progress: so.progress}
	return jstool.Walk(ctx, o.JS, st, wo, func(msg jetstream.Msg, md *jetstream.MsgMetadata) error {
		// A mark (what a replay or purge did to a copy) is not a copy: it is
		// never shown, counted, replayed or purged.
		h := msg.Headers()
		if dlq.IsMark(h) {
			return nil
		}
		e := newEntry(md.Sequence.Stream, msg.Subject(), h, msg.Data())
		if !f.match(e) {
			return nil
		}
		selected++
		if err := fn(e); err != nil {
			return err
		}
		if f.Limit > 0 && selected >= f.Limit {
			return jstool.SkipAll
		}
		return nil
	})
}
