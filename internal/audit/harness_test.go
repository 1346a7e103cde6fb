package audit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
)

const (
	srcName = "METER_READS"
	dlqName = "METER_READS_DLQ"
	durable = "meter-consumer"
	prefix  = "meter.dlq"
)

// action is what the test's stand-in for the fleet does with a delivery.
type action int

const (
	ack        action = iota // billed
	deadLetter               // copy confirmed, then TERM
	twoCopies                // two copies (a retry past the duplicate window), then TERM
	hold                     // left in flight
)

// env is a server with the source and dead-letter streams and the durable.
type env struct {
	t   *testing.T
	nc  *nats.Conn
	js  jetstream.JetStream
	src jetstream.Stream
	at  map[uint64]time.Time // stream timestamp of each read published
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Run(t)
	nc, js := natstest.Connect(t, s)
	e := &env{t: t, nc: nc, js: js, at: map[uint64]time.Time{}}
	e.createSource()
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: dlqName, Subjects: []string{prefix + ".>"}, Duplicates: 20 * time.Minute})
	require.NoError(t, err)
	return e
}

func (e *env) createSource() {
	e.t.Helper()
	src, err := e.js.CreateStream(e.t.Context(), jetstream.StreamConfig{Name: srcName, Subjects: []string{"meter.reads.>"}, Duplicates: 2 * time.Minute})
	require.NoError(e.t, err)
	e.src = src
	_, err = e.js.CreateOrUpdateConsumer(e.t.Context(), srcName, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute, MaxAckPending: 10000,
	})
	require.NoError(e.t, err)
}

// key is the idempotency key of read i.
func key(i int) string { return fmt.Sprintf("K-%d", i) }

// publish stores n reads, i from 1, keyed key(i).
func (e *env) publish(n int) {
	e.t.Helper()
	for i := 1; i <= n; i++ {
		body := fmt.Appendf(nil, `{"meter_id":"MTR-%d","read_at":"2026-11-30T06:00:00Z","quantity":"1.000","unit":"kWh","idempotency_key":%q}`, i, key(i))
		_, err := e.js.Publish(e.t.Context(), fmt.Sprintf("meter.reads.r%d", i%3), body)
		require.NoError(e.t, err)
	}
}

// settle fetches n deliveries from the durable and does with each what do
// says (ack by default), as the fleet would; it waits for the ack floor.
func (e *env) settle(n int, do map[uint64]action) {
	e.t.Helper()
	ctx := e.t.Context()
	cons, err := e.js.Consumer(ctx, srcName, durable)
	require.NoError(e.t, err)
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(e.t, err)
	var floor uint64
	held := false
	got := 0
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		require.NoError(e.t, err)
		seq := md.Sequence.Stream
		e.at[seq] = md.Timestamp
		switch a := do[seq]; a {
		case ack:
			require.NoError(e.t, m.DoubleAck(ctx))
		case deadLetter, twoCopies:
			c := dlq.Build(prefix, dlq.Entry{
				Reason: dlq.ReasonPermanent, Cause: classify.Cause("http_422"), Err: errors.New("downstream answered 422"),
				Stream: srcName, Consumer: durable, Subject: m.Subject(), Sequence: seq, Deliveries: md.NumDelivered,
				PublishedAt: md.Timestamp, Header: m.Headers(), Data: m.Data(),
			}, md.Timestamp.Add(time.Second))
			_, err := e.js.PublishMsg(ctx, c, jetstream.WithExpectStream(dlqName))
			require.NoError(e.t, err)
			if a == twoCopies {
				c.Header.Del(nats.MsgIdHdr) // as a copy made again past the duplicate window
				_, err := e.js.PublishMsg(ctx, c, jetstream.WithExpectStream(dlqName))
				require.NoError(e.t, err)
			}
			require.NoError(e.t, m.Term())
		case hold:
			held = true
			continue
		}
		if !held {
			floor = seq
		}
	}
	require.NoError(e.t, batch.Error())
	require.Equal(e.t, n, got)
	require.Eventually(e.t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == floor
	}, 10*time.Second, 10*time.Millisecond, "ack floor %d", floor)
}

// auditor returns an Auditor of the env's streams.
func (e *env) auditor(mem int) *audit.Auditor {
	return &audit.Auditor{JS: e.js, Stream: srcName, DLQStream: dlqName, DLQPrefix: prefix, Durable: durable,
		TempDir: e.t.TempDir(), SortMemory: mem, IdleWait: 500 * time.Millisecond}
}

// ledger is an engine ledger of keys, one a line.
func ledger(keys ...string) *audit.Ledger {
	return &audit.Ledger{Name: "ledger.txt", R: strings.NewReader(strings.Join(keys, "\n") + "\n")}
}

// got is a finding reduced to what the tests compare.
type got struct {
	Kind       audit.Kind
	Seq, ToSeq uint64
	Key        string
	DLQSeqs    []uint64
}

func findings(t *testing.T, r *audit.Result) []got {
	t.Helper()
	var out []got
	require.NoError(t, r.Findings(func(f audit.Finding) error {
		out = append(out, got{Kind: f.Kind, Seq: f.Seq, ToSeq: f.ToSeq, Key: f.Key, DLQSeqs: f.DLQSeqs})
		return nil
	}))
	return out
}
