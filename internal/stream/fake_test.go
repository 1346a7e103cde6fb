package stream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/engine"
)

// withEngine returns o with the engine's view tuned by eo and the breaker
// from bo (nil: none), as Engine builds them for the service.
func withEngine(tb testing.TB, o Options, eo engine.Options, bo *breaker.Options) Options {
	tb.Helper()
	if err := Engine(&o, eo, bo); err != nil {
		tb.Fatal(err)
	}
	return o
}

// fakeMsg is a jetstream.Msg with the metadata a test sets, recording every
// settlement in order: "ack", "nak", "nak 1.5s", "term <reason>",
// "in_progress". A quiet one records nothing and returns its metadata
// without a copy, for benchmarks: it isolates handle from the client and
// the server.
type fakeMsg struct {
	data  []byte
	hdr   nats.Header
	md    jetstream.MsgMetadata
	quiet bool

	mu  sync.Mutex
	ops []string
}

// fakePublishedAt is every fake message's stream timestamp.
var fakePublishedAt = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

func newFakeMsg(data string, delivered uint64) *fakeMsg {
	return &fakeMsg{data: []byte(data), md: jetstream.MsgMetadata{
		Sequence: jetstream.SequencePair{Consumer: delivered, Stream: 42}, NumDelivered: delivered,
		Stream: "METER_READS", Consumer: "meter-consumer", Timestamp: fakePublishedAt,
	}}
}

func (m *fakeMsg) record(op string) error {
	if m.quiet {
		return nil
	}
	m.mu.Lock()
	m.ops = append(m.ops, op)
	m.mu.Unlock()
	return nil
}

// settled returns the settlements other than keep-alives.
func (m *fakeMsg) settled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, op := range m.ops {
		if op != "in_progress" {
			out = append(out, op)
		}
	}
	return out
}

func (m *fakeMsg) count(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.ops {
		if o == op || strings.HasPrefix(o, op+" ") {
			n++
		}
	}
	return n
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	if m.quiet {
		return &m.md, nil
	}
	md := m.md
	return &md, nil
}
func (m *fakeMsg) Data() []byte                       { return m.data }
func (m *fakeMsg) Headers() nats.Header               { return m.hdr }
func (m *fakeMsg) Subject() string                    { return "meter.reads.north" }
func (m *fakeMsg) Reply() string                      { return "" }
func (m *fakeMsg) Ack() error                         { return m.record("ack") }
func (m *fakeMsg) DoubleAck(context.Context) error    { return m.record("ack") }
func (m *fakeMsg) Nak() error                         { return m.record("nak") }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.record(fmt.Sprint("nak ", d)) }
func (m *fakeMsg) InProgress() error                  { return m.record("in_progress") }
func (m *fakeMsg) Term() error                        { return m.record("term") }
func (m *fakeMsg) TermWithReason(r string) error      { return m.record("term " + r) }

// memRecords keeps records in memory, each with its revision.
type memRecords struct {
	mu  sync.Mutex
	m   map[uint64]Record
	rev map[uint64]uint64
}

func (r *memRecords) Get(_ context.Context, seq uint64) (Stored, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rev, ok := r.rev[seq]
	if !ok {
		return Stored{}, nil
	}
	return Stored{Record: r.m[seq].clone(), Revision: rev}, nil
}

func (r *memRecords) Put(_ context.Context, seq uint64, rec Record, rev uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m, r.rev = map[uint64]Record{}, map[uint64]uint64{}
	}
	if r.rev[seq] != rev {
		return 0, fmt.Errorf("record %d at revision %d, not %d: %w", seq, r.rev[seq], rev, ErrRecordConflict)
	}
	r.m[seq] = rec.clone()
	r.rev[seq]++
	return r.rev[seq], nil
}

// seed stores rec as the record of the fake message's read.
func (r *memRecords) seed(t testing.TB, seq uint64, rec Record) {
	t.Helper()
	rec.PublishedAt = fakePublishedAt
	if _, err := r.Put(t.Context(), seq, rec, 0); err != nil {
		t.Fatal(err)
	}
}

// record returns the record of seq, without its stream timestamp.
func (r *memRecords) record(seq uint64) Record {
	s, _ := r.Get(context.Background(), seq)
	s.Record.PublishedAt = time.Time{}
	return s.Record
}

// fakeDeadLetter stores copies in memory, or fails as told.
type fakeDeadLetter struct {
	mu     sync.Mutex
	copies []dlq.Entry
	err    error                     // returned by every Publish when set
	block  bool                      // Publish waits for its context to end
	stored func(dlq.Entry) bool      // Stored's answer (default false)
	looked []time.Time               // the from of every Stored call
	hook   func(dlq.Entry) error     // called by Publish when set, instead of the above
	seen   func(ctx context.Context) // called with each Publish's context
}

func (f *fakeDeadLetter) Publish(ctx context.Context, e dlq.Entry) error {
	if f.seen != nil {
		f.seen(ctx)
	}
	if f.block {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", dlq.ErrPublish, ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hook != nil {
		return f.hook(e)
	}
	if f.err != nil {
		return f.err
	}
	f.copies = append(f.copies, e)
	return nil
}

func (f *fakeDeadLetter) Stored(_ context.Context, e dlq.Entry, from, _ time.Time) (dlq.Found, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looked = append(f.looked, from)
	return dlq.Found{Copy: f.stored != nil && f.stored(e)}, nil
}

func (f *fakeDeadLetter) all() []dlq.Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dlq.Entry(nil), f.copies...)
}

// owned is a delivery of m that holds no lease (always held), as tests
// hand it to the parts that take deliveries.
func owned(m jetstream.Msg) *delivery { return newDelivery(m, nil) }
