package audit

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// pageSize bounds the messages buffered by the client at once.
const pageSize = 256

// DefaultIdleWait is how long a walk waits for the next message before it
// asks the server whether any are left.
const DefaultIdleWait = 2 * time.Second

// errStop ends a walk early without an error.
var errStop = errors.New("stop walk")

// walk (of the dead-letter stream) calls fn with the messages of st that cfg selects, in sequence
// order, up to last (the last sequence when the audit began). It reads
// through an ordered consumer (ephemeral, no acks, memory storage,
// flow-controlled, pageSize messages at a time) and deletes it when done:
// the durable and the fleet are not disturbed. fn may return errStop.
func (a *Auditor) walk(ctx context.Context, st jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last uint64,
	fn func(jetstream.Msg, *jetstream.MsgMetadata) error,
) error {
	name := st.CachedInfo().Config.Name
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return wrapNATS("read stream "+name, err)
	}
	defer a.removeConsumer(name, cons)
	if cons.CachedInfo().NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pageSize))
	if err != nil {
		return wrapNATS("read stream "+name, err)
	}
	defer it.Stop()
	for {
		msg, err := a.next(ctx, it, cons, name)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return wrapNATS("read stream "+name, err)
		}
		if md.Sequence.Stream > last {
			return nil
		}
		if err := fn(msg, md); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
		if md.NumPending == 0 || md.Sequence.Stream >= last {
			return nil
		}
	}
}

// next returns the next message, or errStop when the server has none left.
func (a *Auditor) next(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer, name string) (jetstream.Msg, error) {
	idle := a.IdleWait
	if idle <= 0 {
		idle = DefaultIdleWait
	}
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
			return nil, wrapNATS("read stream "+name, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, wrapNATS("read stream "+name, err)
		}
		if info.NumPending == 0 {
			return nil, errStop
		}
	}
}

// removeConsumer deletes a walk's ordered consumer at once rather than
// leaving it to the server's inactivity threshold.
func (a *Auditor) removeConsumer(stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || a.JS.Conn() == nil || a.JS.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.JS.DeleteConsumer(ctx, stream, info.Name)
}
