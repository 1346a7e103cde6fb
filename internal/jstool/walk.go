package jstool

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultIdleWait is how long a walk waits for the next message before it
// asks the server whether any are left.
const DefaultIdleWait = 2 * time.Second

// DefaultPageSize is how many messages the client buffers at once when
// WalkOptions.PageSize is not set.
const DefaultPageSize = 128

// SkipAll, returned by a Walk's fn, ends the walk without an error, as
// fs.SkipAll ends fs.WalkDir.
var SkipAll = errors.New("skip the rest of the stream")

// WalkOptions says how Walk reads.
type WalkOptions struct {
	// What names the stream in errors, "read <What> <name>: ..." (default
	// "stream").
	What string
	// HeadersOnly asks for the headers and not the payloads.
	HeadersOnly bool
	// PageSize bounds the messages buffered by the client at once
	// (default DefaultPageSize).
	PageSize int
	// IdleWait is how long the walk waits for the next message before it
	// asks the server whether any are left (default DefaultIdleWait).
	IdleWait time.Duration
	// Progress, when set, is called after each message fn took without an
	// error, with the messages walked so far and the most the walk will
	// walk.
	Progress func(done, total uint64)
}

// Walk calls fn with the messages of st in sequence order, up to the last
// one stored when st's info was read (its CachedInfo), through an ordered
// consumer that it deletes when done; js is the context st was looked up
// with. fn may return SkipAll to stop; any other error of fn ends the walk
// and is returned as is. NATS errors are wrapped with Wrap.
func Walk(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, o WalkOptions,
	fn func(jetstream.Msg, *jetstream.MsgMetadata) error,
) error {
	info := st.CachedInfo()
	if info.State.Msgs == 0 {
		return nil
	}
	name, last := info.Config.Name, info.State.LastSeq
	what := o.What
	if what == "" {
		what = "stream"
	}
	what = "read " + what + " " + name
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: o.HeadersOnly})
	if err != nil {
		return Wrap(what, err)
	}
	defer removeConsumer(js, name, cons)
	total := cons.CachedInfo().NumPending
	if total == 0 {
		return nil
	}
	page := o.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(page))
	if err != nil {
		return Wrap(what, err)
	}
	defer it.Stop()
	idle := o.IdleWait
	if idle <= 0 {
		idle = DefaultIdleWait
	}
	var done uint64
	for {
		msg, err := next(ctx, it, cons, idle, what)
		if err != nil || msg == nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return Wrap(what, err)
		}
		seq := md.Sequence.Stream
		if seq > last {
			return nil
		}
		done++
		if err := fn(msg, md); err != nil {
			if errors.Is(err, SkipAll) {
				return nil
			}
			return err
		}
		if o.Progress != nil {
			o.Progress(done, total)
		}
		if md.NumPending == 0 || seq >= last {
			return nil
		}
	}
}

// next returns the next message, or none when the server has none left.
func next(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer, idle time.Duration, what string) (jetstream.Msg, error) {
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
			return nil, Wrap(what, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, Wrap(what, err)
		}
		if info.NumPending == 0 {
			return nil, nil
		}
	}
}

// removeConsumer deletes a walk's ordered consumer at once rather than
// leaving it to the server's inactivity threshold.
func removeConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || js.Conn() == nil || js.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name)
}
