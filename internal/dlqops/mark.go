package dlqops

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/dlq"
)

// UnknownActor is the name a mark gives when Ops.Actor is empty.
const UnknownActor = "unknown"

func (o *Ops) actor() string {
	if o.Actor == "" {
		return UnknownActor
	}
	return o.Actor
}

// prefix returns the dead-letter prefix e's copy was published under: its
// subject less "." and the original subject. ok is false when the copy's
// subject does not end that way: its mark's subject is then unknown.
func (e Entry) prefix() (string, bool) {
	p, ok := strings.CutSuffix(e.CopySubject, "."+e.Subject)
	return p, ok && p != "" && e.Subject != ""
}

// errUnmarkable says why copy e cannot be marked.
func errUnmarkable(e Entry) error {
	return fmt.Errorf("its subject %q does not end with its original subject %q (%s), so it cannot be marked",
		e.CopySubject, e.Subject, dlq.HeaderSubject)
}

// markOf returns the mark of kind k of copy e: the read as the copy names it
// and the copy's sequence. Who, when, why and the replay's sequence are the
// caller's to set.
func markOf(e Entry, k dlq.MarkKind) dlq.Mark {
	seq, _ := strconv.ParseUint(e.Header.Get(dlq.HeaderSequence), 10, 64)
	return dlq.Mark{
		Kind: k, Stream: e.Header.Get(dlq.HeaderStream), Sequence: seq, PublishedAt: e.PublishedAt,
		Subject: e.Subject, CopySequence: e.Seq,
	}
}

// mark stores m, by o.Actor at o.now(), in the dead-letter stream under
// prefix, expecting that stream, and waits for JetStream's confirmation. A
// mark stored already (the same act on the same copy, retried) is
// confirmed as a duplicate of it.
func (o *Ops) mark(ctx context.Context, prefix string, m dlq.Mark) error {
	m.By, m.At = o.actor(), o.now()
	msg := dlq.BuildMark(prefix, m)
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := o.JS.PublishMsg(ctx, msg, jetstream.WithExpectStream(o.Stream)); err != nil {
		return fmt.Errorf("publish mark to %s: %w", msg.Subject, err)
	}
	return nil
}
