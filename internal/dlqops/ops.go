package dlqops

import (
	"context"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/jstool"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Ops runs the dead-letter operations. Set the fields, then call its
// methods; an Ops is not modified by them.
type Ops struct {
	JS           jetstream.JetStream
	Stream       string    // the dead-letter stream, e.g. METER_READS_DLQ
	SourceStream string    // where replays must be stored, e.g. METER_READS; "" accepts any stream
	Out          io.Writer // tables, reports and the replay summary (default io.Discard)
	Now          func() time.Time
	Terminal     bool // draw a progress bar during a replay
	// Actor is who runs the tool, written on the marks of replayed and
	// purged copies (dlq.Mark.By); "" is written as UnknownActor.
	Actor string

	// Sleep waits d or until ctx is done, for the replay rate limit
	// (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
	// IdleWait is how long a scan waits for the next copy before it asks
	// the server whether any are left (default jstool.DefaultIdleWait):
	// copies can be deleted while a scan runs.
	IdleWait time.Duration
}

func (o *Ops) out() io.Writer {
	if o.Out == nil {
		return io.Discard
	}
	return o.Out
}

func (o *Ops) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o *Ops) sleep(ctx context.Context, d time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep(ctx, d)
	}
	return retry.Sleep(ctx, d)
}

// dlqStream looks up the dead-letter stream; its cached info is fresh.
func (o *Ops) dlqStream(ctx context.Context) (jetstream.Stream, error) {
	if err := jstool.CheckConn(o.JS); err != nil {
		return nil, err
	}
	return jstool.Lookup(ctx, o.JS, o.Stream, "dead-letter stream", "--dlq-stream")
}
