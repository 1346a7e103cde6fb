package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

const goodRead = `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1.5","unit":"kWh"}`

func status(code int) error {
	return binaryClassifier.Status(code, "")
}

// The settlement table of docs/SETTLEMENT.md carried out, one row per
// situation: a delivery count, what is on record, the sink's answer, and the
// one settlement that follows, on the message, the records and the
// dead-letter stream. "held" is a read waiting out its retry delay in the
// process. TestSettlementTable asserts the fates themselves.
func TestSettlementCarriedOut(t *testing.T) {
	t.Parallel()
	long := time.Now().Add(-time.Hour)
	tests := []struct {
		name      string
		data      string
		delivered uint64
		rec       Record
		answer    error // the sink's; nil is a 2xx
		cut       bool  // the stop's deadline ends during the call
		old       bool  // published longer ago than the age limit
		dlqErr    error
		stored    bool // a copy is found in the dead-letter stream

		want       []string // settlements, keep-alives left out
		wantHeld   bool
		wantCalls  int
		wantCopy   string // "reason cause" of the copy stored, "" for none
		attempts   uint64 // the copy's attempts spent
		wantRecord Record
	}{
		{name: "success", delivered: 1, want: []string{"ack"}, wantCalls: 1},
		{name: "transient, attempts left", delivered: 1, answer: status(503), wantHeld: true, wantCalls: 1,
			wantRecord: Record{Calls: 1, CountsCalls: true}},
		{name: "transient again, attempts left", delivered: 2, rec: Record{Calls: 1, CountsCalls: true}, answer: status(503),
			wantHeld: true, wantCalls: 1, wantRecord: Record{Calls: 2, CountsCalls: true}},
		{name: "transient at the last attempt", delivered: 3, rec: Record{Calls: 2, CountsCalls: true}, answer: status(503),
			want: []string{"term exhausted"}, wantCalls: 1, attempts: 3, wantCopy: "exhausted http_503"},
		{name: "transient after deliveries that reached no call", delivered: 3, rec: Record{Calls: 1, CountsCalls: true}, answer: status(503),
			wantHeld: true, wantCalls: 1, wantRecord: Record{Calls: 2, CountsCalls: true}},
		{name: "a redirect at the last attempt", delivered: 3, rec: Record{Calls: 2, CountsCalls: true}, answer: status(302),
			want: []string{"term exhausted"}, wantCalls: 1, attempts: 3, wantCopy: "exhausted redirect"},
		{name: "permanent", delivered: 1, answer: status(422),
			want: []string{"term http_422"}, wantCalls: 1, attempts: 1, wantCopy: "permanent http_422"},
		{name: "invalid read", data: `{"meter_id":"MTR-1"}`, delivered: 1,
			want: []string{"term invalid_payload"}, attempts: 0, wantCopy: "permanent invalid_payload"},
		{name: "delivered past the attempt limit, no call on record", delivered: 4,
			want: []string{"ack"}, wantCalls: 1},
		{name: "calls on record past the attempt limit: the last one's delivery ended unsettled", delivered: 4,
			rec: Record{Calls: 3, CountsCalls: true}, want: []string{"term exhausted"}, attempts: 3, wantCopy: "exhausted unsettled"},
		{name: "deliveries without a call are credited up to a bound", delivered: 1 + MaxUncalled + 3,
			want: []string{"term exhausted"}, attempts: 3, wantCopy: "exhausted unsettled"},
		{name: "the bound on deliveries without a call leaves room", delivered: 1 + MaxUncalled + 2, answer: status(503),
			want: []string{"term exhausted"}, wantCalls: 1, attempts: 3, wantCopy: "exhausted http_503"},
		{name: "sheds are not attempts", delivered: 4, rec: Record{Calls: 1, Sheds: 2, CountsCalls: true}, answer: status(503),
			wantHeld: true, wantCalls: 1, wantRecord: Record{Calls: 2, Sheds: 2, CountsCalls: true}},
		{name: "an earlier version's record: past the attempt limit by hand-backs only", delivered: 4, rec: Record{HandBacks: 2},
			want: []string{"ack"}, wantCalls: 1, wantRecord: Record{HandBacks: 2}},
		{name: "an earlier version's record: hand-backs leave the attempt limit to real calls", delivered: 4, rec: Record{HandBacks: 1}, answer: status(503),
			want: []string{"term exhausted"}, wantCalls: 1, attempts: 3, wantCopy: "exhausted http_503"},
		{name: "an earlier version's record: hand-backs are credited up to a bound", delivered: 150, rec: Record{HandBacks: 200},
			want: []string{"term exhausted"}, attempts: 49, wantCopy: "exhausted unsettled"},
		{name: "a last shed awaiting a verdict, none found: dead-lettered without a call", delivered: 4,
			rec: Record{Calls: 2, Sheds: 1, CountsCalls: true,
				Awaiting: &Decision{Reason: dlq.ReasonExhausted, Class: "transient", Cause: classify.CauseHTTP503, Error: "http_503: downstream answered 503"}},
			want: []string{"term exhausted"}, attempts: 3, wantCopy: "exhausted http_503"},
		{name: "a shed credited, no verdict awaited: called again", delivered: 4, rec: Record{Calls: 2, Sheds: 1, CountsCalls: true},
			want: []string{"ack"}, wantCalls: 1, wantRecord: Record{Calls: 2, Sheds: 1, CountsCalls: true}},
		{name: "fate decided, copy missing", delivered: 2,
			rec:  Record{DeadLetter: &Decision{Reason: dlq.ReasonPermanent, Class: "permanent", Cause: classify.CauseHTTP422, Error: "http_422: downstream answered 422", At: time.Now(), Last: time.Now()}},
			want: []string{"term http_422"}, attempts: 1, wantCopy: "permanent http_422"},
		{name: "fate decided long ago, copy found", delivered: 2, stored: true,
			rec:  Record{DeadLetter: &Decision{Reason: dlq.ReasonPermanent, Class: "permanent", Cause: classify.CauseHTTP422, At: long, Last: long}},
			want: []string{"term http_422"}},
		{name: "copy not confirmed", delivered: 1, answer: status(422), dlqErr: fmt.Errorf("%w: timeout", dlq.ErrPublish),
			wantHeld: true, wantCalls: 1},
		{name: "copy rejected", delivered: 1, answer: status(422), dlqErr: fmt.Errorf("%w: %w: too large", dlq.ErrPublish, dlq.ErrRejected),
			wantHeld: true, wantCalls: 1},
		{name: "transient past the read's age limit", delivered: 1, answer: status(503), old: true,
			want: []string{"term expired"}, wantCalls: 1, attempts: 1, wantCopy: "expired http_503"},
		{name: "cut by the stop's deadline: nothing to record", delivered: 1, cut: true,
			want: []string{"nak"}, wantCalls: 1},
		{name: "cut by the stop's deadline at the last attempt", delivered: 3, rec: Record{Calls: 2, CountsCalls: true}, cut: true,
			want: []string{"nak"}, wantCalls: 1, wantRecord: Record{Calls: 2, CountsCalls: true}},
		{name: "cut by the stop's deadline, an earlier version's record: rewritten to count calls", delivered: 3, rec: Record{HandBacks: 1}, cut: true,
			want: []string{"nak"}, wantCalls: 1, wantRecord: Record{Calls: 1, HandBacks: 1, CountsCalls: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := goodRead
			if tt.data != "" {
				data = tt.data
			}
			msg := newFakeMsg(data, tt.delivered)
			maxAge := time.Duration(0)
			if tt.old {
				maxAge = time.Hour // the fake's stream timestamp is 2026-11-30T07:00:00Z
			}
			recs := &memRecords{}
			if tt.rec != (Record{}) {
				recs.seed(t, 42, tt.rec)
			}
			dl := &fakeDeadLetter{err: tt.dlqErr, stored: func(dlq.Entry) bool { return tt.stored }}
			graceful, stop := context.WithCancel(t.Context())
			defer stop()
			hard, cut := context.WithCancel(t.Context())
			defer cut()
			var calls atomic.Int64
			sink := downstream.SinkFunc(func(ctx context.Context, _ meter.Read) error {
				calls.Add(1)
				if tt.cut {
					stop()
					cut()
					<-ctx.Done()
					return classify.Of(fmt.Errorf("post read: %w", ctx.Err()))
				}
				return tt.answer
			})
			reg := prometheus.NewRegistry()
			c, err := New(withEngine(t, Options{
				Policy: retry.Policy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 3},
				Sink:   sink, DeadLetter: dl, Records: recs, Metrics: NewMetrics(reg),
				HandlerTimeout: time.Second, AckWait: 5 * time.Second, Concurrency: 4, ShutdownTimeout: time.Second, DeadLetterWindow: 20 * time.Minute,
				Rand: retry.NewRand(1), MaxReadAge: maxAge, DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
			}, engine.Options{}, nil))
			require.NoError(t, err)
			c.pullingEnded() // nothing pulls here: a hand-back NAKs at once

			c.handle(lifetimes{graceful: graceful, hard: hard, giveUp: t.Context()}, owned(msg), c.keep.watches[0])

			assert.Equal(t, tt.want, msg.settled())
			assert.Equal(t, tt.wantHeld, c.keep.size() == 1, "held for a retry")
			assert.Equal(t, int64(tt.wantCalls), calls.Load(), "downstream calls")
			copies := dl.all()
			if tt.wantCopy == "" {
				assert.Empty(t, copies)
			} else if assert.Len(t, copies, 1) {
				assert.Equal(t, tt.wantCopy, fmt.Sprint(copies[0].Reason, " ", copies[0].Cause))
				assert.Equal(t, tt.attempts, copies[0].Attempts, "attempts spent")
			}
			got := recs.record(42)
			switch {
			case tt.wantCopy != "" || tt.dlqErr != nil || tt.stored:
				require.NotNil(t, got.DeadLetter, "the decision is recorded before the copy")
			default:
				assert.Equal(t, tt.wantRecord, got)
			}
			if errors.Is(tt.dlqErr, dlq.ErrRejected) {
				assert.Equal(t, 1.0, testutil.ToFloat64(c.m.dlqRejections))
			}
		})
	}
}

// A read waiting for the breaker when the stop begins is handed back, not
// charged.
func TestWaitingForTheBreakerAtStopIsAHandBack(t *testing.T) {
	t.Parallel()
	msg := newFakeMsg(goodRead, 1) // a fresh read: its failure is evidence of an outage
	recs := &memRecords{}
	var calls atomic.Int64
	sink := downstream.SinkFunc(func(context.Context, meter.Read) error {
		calls.Add(1)
		return status(http.StatusServiceUnavailable)
	})
	c, err := New(withEngine(t, Options{
		Policy: retry.Policy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 3},
		Sink:   sink, DeadLetter: &fakeDeadLetter{}, Records: recs, Metrics: NewMetrics(prometheus.NewRegistry()),
		HandlerTimeout: time.Second, AckWait: 5 * time.Second, Concurrency: 4, ShutdownTimeout: time.Second, Rand: retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	}, engine.Options{Quiet: time.Nanosecond}, // the breaker opens on the first failure
		&breaker.Options{Window: 30 * time.Second, MinCalls: 1, FailureRatio: 0.5, CoolDown: time.Minute, MaxCoolDown: time.Minute, Probes: 3}))
	require.NoError(t, err)
	defer c.breaker.Stop()
	c.pullingEnded() // nothing pulls here: a hand-back NAKs at once
	graceful, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(lifetimes{graceful: graceful, hard: t.Context(), giveUp: t.Context()}, owned(msg), c.keep.watches[0])
	}()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	stop()
	<-done
	assert.Equal(t, []string{"nak"}, msg.settled())
	assert.Equal(t, Record{}, recs.record(42), "nothing to record: the read's record counts calls, and none was charged")
	assert.Equal(t, 1.0, testutil.ToFloat64(c.m.handBacks))
}

// Every path of handle fits in the handler timeout, the dead-letter copy
// included, so that the bound on how long a read waits in the client buffer
// (ceil(pull_batch/concurrency) handler timeouts) holds. A copy that does
// not fit is tried again on the read's next delivery, which goes straight
// to it: the decision is on record.
func TestTheDeadLetterPathFitsInTheHandlerTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	recs := &memRecords{}
	var deadline time.Time
	dl := &fakeDeadLetter{block: true, seen: func(ctx context.Context) { deadline, _ = ctx.Deadline() }}
	c, err := New(withEngine(t, Options{
		Policy: retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}, Sink: downstream.Discard{},
		DeadLetter: dl, Records: recs, Metrics: NewMetrics(prometheus.NewRegistry()),
		HandlerTimeout: timeout, AckWait: 5 * time.Second, Concurrency: 4, ShutdownTimeout: time.Second, Rand: retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	}, engine.Options{}, nil))
	require.NoError(t, err)
	msg := newFakeMsg(`not json`, 1)
	began := time.Now()
	c.handle(lifetimes{graceful: t.Context(), hard: t.Context(), giveUp: t.Context()}, owned(msg), c.keep.watches[0])
	ended := time.Now()

	// The copy's deadline is the delivery's: the handler timeout from when
	// the delivery began, somewhere between began and ended.
	assert.False(t, deadline.Before(began.Add(timeout)), "deadline %s before %s", deadline, began.Add(timeout))
	assert.False(t, deadline.After(ended.Add(timeout)), "deadline %s after %s", deadline, ended.Add(timeout))
	assert.False(t, ended.Before(deadline), "the copy was tried until the deadline")
	assert.Empty(t, msg.settled(), "not terminated: held, to be NAKed")
	assert.Equal(t, 1, c.keep.size())
	got := recs.record(42)
	require.NotNil(t, got.DeadLetter)
	assert.Equal(t, classify.CauseInvalidPayload, got.DeadLetter.Cause)
}

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier, _ = config.Default().Downstream.Classifier()

// BenchmarkHandle settles a successful read the way a worker does: decode,
// deliver to a no-op sink, ack, metrics, with the production JSON logger at
// info writing nowhere. It excludes the client's metadata parsing (the fake
// returns fixed metadata) and the settlement's network cost.
func BenchmarkHandle(b *testing.B) {
	c, msg := benchConsumer(b), benchMsg(42)
	ctx := context.Background()
	s := c.keep.watches[0]
	b.ReportAllocs()
	b.SetBytes(int64(len(msg.data)))
	for b.Loop() {
		c.handle(lifetimes{graceful: ctx, hard: ctx, giveUp: ctx}, owned(msg), s)
	}
}

// BenchmarkHandleParallel is BenchmarkHandle on 32 goroutines at once,
// each a worker with its own keep-alive watch, and with the server's
// clock measured, as in a replica under load: what the workers' shared
// state (the engine's view, the limit, the metrics, the server's clock)
// costs when they all settle at once.
func BenchmarkHandleParallel(b *testing.B) {
	c := benchConsumer(b)
	c.server.last.Store(&measurement{server: time.Now(), mono: c.o.Clock.Mono()})
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg(0).data)))
	b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		s := c.keep.watches[int(i)%len(c.keep.watches)]
		msg := benchMsg(uint64(i))
		for pb.Next() {
			c.handle(lifetimes{graceful: ctx, hard: ctx, giveUp: ctx}, owned(msg), s)
		}
	})
}

// benchConsumer is the consumer of the handle benchmarks.
func benchConsumer(b *testing.B) *Consumer {
	b.Helper()
	c, err := New(withEngine(b, Options{
		Policy:      retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute},
		Concurrency: 32, AckWait: 30 * time.Second, HandlerTimeout: 6 * time.Second, ShutdownTimeout: 30 * time.Second,
		Sink: downstream.Discard{}, SinkTimeout: downstream.Discard{}.Timeout(),
		DeadLetter:      &fakeDeadLetter{},
		Metrics:         NewMetrics(prometheus.NewRegistry()),
		Logger:          slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Rand:            retry.NewRand(1),
		DeadLetterRetry: retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	}, engine.Options{}, nil))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchMsg is the message a handle benchmark settles, at stream sequence
// seq.
func benchMsg(seq uint64) *fakeMsg {
	return &fakeMsg{
		quiet: true,
		data:  []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`),
		md: jetstream.MsgMetadata{
			Sequence:     jetstream.SequencePair{Consumer: seq, Stream: seq},
			NumDelivered: 1,
			Stream:       "METER_READS",
			Consumer:     "meter-consumer",
			Timestamp:    time.Date(2026, 11, 30, 7, 0, 1, 0, time.UTC),
		},
	}
}
