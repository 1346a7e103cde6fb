package dlqops_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
	"github.com/meterline/meter-consumer/internal/natstest"
)

const (
	srcName = "METER_READS"
	dlqName = "METER_READS_DLQ"
)

// base is the fake "now" of every test: reads were dead-lettered before it.
var base = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

// read is one dead-lettered read of the fixture.
type read struct {
	subject string
	reason  dlq.Reason
	cause   string
	err     string
	seq     uint64        // original stream sequence
	ago     time.Duration // dead-lettered this long before base
	header  nats.Header
	data    []byte
}

// payload is a valid meter read of meter.
func payload(meter string) []byte {
	return fmt.Appendf(nil, `{"meter_id":%q,"read_at":"2026-11-30T06:00:00+01:00","quantity":"12.500","unit":"kWh"}`, meter)
}

// reads is the standard fixture; the dead-letter stream stores them as
// sequences 1 to 5.
func reads() []read {
	return []read{
		{subject: "meter.reads.north", reason: dlq.ReasonPermanent, cause: "http_422", seq: 101, ago: 3 * time.Hour,
			err:    "http_422: downstream answered 422 Unprocessable Entity",
			header: nats.Header{"Nats-Msg-Id": {"he-1"}, "X-Head-End": {"he-7", "he-8"}}, data: payload("MTR-1")},
		{subject: "meter.reads.north", reason: dlq.ReasonExhausted, cause: "http_503", seq: 102, ago: 2 * time.Hour,
			err: "http_503: downstream answered 503 Service Unavailable", data: payload("MTR-2")},
		{subject: "meter.reads.south", reason: dlq.ReasonPermanent, cause: "invalid_payload", seq: 103, ago: 90 * time.Minute,
			err: "invalid_payload: invalid meter read: body: invalid UTF-8", data: []byte("\xff not a read")},
		{subject: "meter.reads.south.annex", reason: dlq.ReasonExhausted, cause: "timeout", seq: 104, ago: 30 * time.Minute,
			err: `timeout: Post "https://rating.example.com/v1/reads": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, data: payload("MTR-1")},
		{subject: "meter.reads.east", reason: dlq.ReasonPermanent, cause: "http_422", seq: 105, ago: 5 * time.Minute,
			err: "http_422: downstream answered 422 Unprocessable Entity", data: payload("MTR-4")},
	}
}

// createStreams creates the source stream and the dead-letter stream.
func createStreams(ctx context.Context, js jetstream.JetStream) error {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: srcName, Subjects: []string{"meter.reads.>"}, Duplicates: 2 * time.Minute,
	}); err != nil {
		return err
	}
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: dlqName, Subjects: []string{"meter.dlq.>"}, Duplicates: 20 * time.Minute,
	})
	return err
}

// deadLetter stores the dead-letter copies of rs, built by dlq.Build.
func deadLetter(ctx context.Context, js jetstream.JetStream, rs ...read) error {
	for _, r := range rs {
		at := base.Add(-r.ago)
		var err error
		if r.err != "" {
			err = errors.New(r.err)
		}
		m := dlq.Build("meter.dlq", dlq.Entry{
			Reason: r.reason, Cause: classify.Cause(r.cause), Err: err,
			Stream: srcName, Consumer: "meter-consumer", Subject: r.subject, Sequence: r.seq,
			Deliveries: deliveries(r.reason), Attempts: deliveries(r.reason), PublishedAt: at.Add(-time.Minute), Header: r.header, Data: r.data,
		}, at)
		if _, err := js.PublishMsg(ctx, m); err != nil { // as dlq.Publisher does: no Nats-Expected-* stored with the copy
			return err
		}
	}
	return nil
}

func deliveries(r dlq.Reason) uint64 {
	if r == dlq.ReasonExhausted {
		return 6
	}
	return 1
}

// env is one test's server, streams, clock and Ops.
type env struct {
	t     *testing.T
	nc    *nats.Conn
	js    jetstream.JetStream
	src   jetstream.Stream
	dlq   jetstream.Stream
	out   *bytes.Buffer
	clock *fakeClock
	ops   *dlqops.Ops
}

func newEnv(t *testing.T, rs ...read) *env {
	t.Helper()
	s := natstest.Run(t)
	nc, js := natstest.Connect(t, s)
	ctx := t.Context()
	require.NoError(t, createStreams(ctx, js))
	require.NoError(t, deadLetter(ctx, js, rs...))
	src, err := js.Stream(ctx, srcName)
	require.NoError(t, err)
	dst, err := js.Stream(ctx, dlqName)
	require.NoError(t, err)
	e := &env{t: t, nc: nc, js: js, src: src, dlq: dst, out: &bytes.Buffer{}, clock: &fakeClock{now: base}}
	e.ops = &dlqops.Ops{
		JS: js, Stream: dlqName, SourceStream: srcName, Out: e.out,
		Now: e.clock.Now, Sleep: e.clock.Sleep,
	}
	return e
}

// seqs returns the sequences stored in st, in order.
func (e *env) seqs(st jetstream.Stream) []uint64 {
	e.t.Helper()
	var got []uint64
	info, err := st.Info(e.t.Context())
	require.NoError(e.t, err)
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		_, err := st.GetMsg(e.t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(e.t, err)
		got = append(got, seq)
	}
	return got
}

// copies returns the sequences of the dead-letter copies, in order: the
// dead-letter stream's messages but its marks.
func (e *env) copies() []uint64 {
	e.t.Helper()
	var got []uint64
	for _, m := range e.msgs(e.dlq) {
		if !dlq.IsMark(m.Header) {
			got = append(got, m.Sequence)
		}
	}
	return got
}

// marks returns the marks in the dead-letter stream, in order, each with
// its subject.
func (e *env) marks() []storedMark {
	e.t.Helper()
	var got []storedMark
	for _, m := range e.msgs(e.dlq) {
		if mk, ok := dlq.ParseMark(m.Header); ok {
			got = append(got, storedMark{Mark: mk, subject: m.Subject, seq: m.Sequence})
		}
	}
	return got
}

// storedMark is a mark as the dead-letter stream holds it.
type storedMark struct {
	dlq.Mark
	subject string
	seq     uint64 // in the dead-letter stream
}

// msgs returns every message in st.
func (e *env) msgs(st jetstream.Stream) []*jetstream.RawStreamMsg {
	e.t.Helper()
	var msgs []*jetstream.RawStreamMsg
	for _, seq := range e.seqs(st) {
		m, err := st.GetMsg(e.t.Context(), seq)
		require.NoError(e.t, err)
		msgs = append(msgs, m)
	}
	return msgs
}

// sourceMsgs returns every message in the source stream.
func (e *env) sourceMsgs() []*jetstream.RawStreamMsg {
	e.t.Helper()
	return e.msgs(e.src)
}

// fakeClock is Now and Sleep for Ops: Sleep advances the clock at once and
// records what it was asked to wait. onSleep, when set, runs first.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	slept   []time.Duration
	onSleep func(n int) error
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.onSleep != nil {
		if err := c.onSleep(len(c.slept) + 1); err != nil {
			return err
		}
	}
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

// startExampleServer starts a server for Example functions, which have no
// testing.T; stop shuts everything down.
func startExampleServer() (js jetstream.JetStream, stop func(), err error) {
	dir, err := os.MkdirTemp("", "dlqops-example-")
	if err != nil {
		return nil, nil, err
	}
	s, err := server.NewServer(natstest.Options(dir))
	if err != nil {
		return nil, nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return nil, nil, errors.New("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return nil, nil, err
	}
	stop = func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
	js, err = jetstream.New(nc)
	if err == nil {
		err = createStreams(context.Background(), js)
	}
	if err == nil {
		err = deadLetter(context.Background(), js, reads()...)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return js, stop, nil
}
