package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/simengine"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// rateEngine is the tests' downstream: an simengine engine of unlimited
// capacity whose answers a test scripts, and which records each call's
// headers and body (Calls).
type rateEngine struct {
	*simengine.Engine
	srv *simengine.Server
}

// newRateEngine answers call n of key with answer(n, key) (nil: 200).
func newRateEngine(t *testing.T, answer func(n int, key string) (int, http.Header)) *rateEngine {
	t.Helper()
	re := &rateEngine{}
	o := simengine.Options{Record: true}
	if answer != nil {
		o.Answer = func(key string, n int) (int, http.Header) { return answer(n, key) }
	}
	eng, err := simengine.New(o)
	require.NoError(t, err)
	re.Engine, re.srv = eng, simengine.NewServer(eng)
	t.Cleanup(re.srv.Close)
	return re
}

// setLatency makes every call take d.
func (re *rateEngine) setLatency(d time.Duration) {
	_ = re.SetServiceTime(d, 0)
}

// setDelay adds f(n, key) to call n of key (nil: nothing).
func (re *rateEngine) setDelay(f func(n int, key string) time.Duration) {
	if f == nil {
		re.SetDelay(nil)
		return
	}
	re.SetDelay(func(key string, n int) time.Duration { return f(n, key) })
}

// total is every call the engine took.
func (re *rateEngine) total() int { return int(re.Stats().Calls) }

// env is one test's world: a server, the streams, a downstream.
type env struct {
	t    *testing.T
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	topo topology.Topology
	cons jetstream.Consumer
	set  *topology.Setup
	re   *rateEngine
	reg  *prometheus.Registry
	m    *stream.Metrics
	logs *logRecorder
}

func testTopology() topology.Topology {
	return topology.Topology{
		Stream: "METER_READS", Subjects: []string{"meter.reads.>"}, Durable: "meter-consumer", Duplicates: 10 * time.Minute,
		DLQStream: "METER_READS_DLQ", DLQPrefix: "meter.dlq", DLQDuplicates: 20 * time.Minute,
		Replicas: 1, AckWait: 5 * time.Second, MaxAckPending: 10000, RecordsTTL: 30 * 24 * time.Hour,
		Concurrency: 8, HandlerTimeout: time.Second, // a pull of 32
	}
}

func newEnv(t *testing.T, answer func(n int, key string) (int, http.Header)) *env {
	t.Helper()
	return newEnvWith(t, answer, nil)
}

// newEnvWith is newEnv with the topology changed by change first.
func newEnvWith(t *testing.T, answer func(n int, key string) (int, http.Header), change func(*topology.Topology)) *env {
	t.Helper()
	s := natstest.Run(t)
	nc, js := natstest.Connect(t, s)
	topo := testTopology()
	if change != nil {
		change(&topo)
	}
	set, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	return &env{t: t, srv: s, nc: nc, js: js, topo: topo, cons: set.Consumer, set: set, re: newRateEngine(t, answer),
		reg: reg, m: stream.NewMetrics(reg), logs: &logRecorder{}}
}

// newOutageEnv is an env whose engine answers 503 while down is set (from
// the start when down), 200 otherwise.
func newOutageEnv(t *testing.T, down bool) (*env, *atomic.Bool) {
	var d atomic.Bool
	d.Store(down)
	return newEnv(t, func(int, string) (int, http.Header) {
		if d.Load() {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}), &d
}

// openAtOnce lets o's breaker open on its first failures: the engine's
// view judges the engine silent (serving no one) as soon as a call fails
// without an answer since, instead of after a second of it. For the tests
// whose subject is what the consumer does once the breaker is open, not
// when it opens.
func openAtOnce(o *opts) {
	o.Engine = &engine.Options{Quiet: time.Nanosecond}
}

func testPolicy() retry.Policy {
	return retry.Policy{Base: 40 * time.Millisecond, Cap: 200 * time.Millisecond, MaxAttempts: 4, MaxServerWait: 5 * time.Second}
}

func (e *env) options(seed uint64) opts {
	e.t.Helper()
	sink, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: e.re.srv.URL, Timeout: 2 * time.Second, Concurrency: 64})
	require.NoError(e.t, err)
	return opts{Options: stream.Options{
		Policy:           testPolicy(),
		Concurrency:      8,
		HandlerTimeout:   2 * time.Second,
		AckWait:          e.topo.AckWait,
		ShutdownTimeout:  5 * time.Second,
		Sink:             sink,
		DeadLetter:       dlq.NewPublisher(e.js, dlq.PublisherOptions{Prefix: e.topo.DLQPrefix, Stream: e.topo.DLQStream, Timeout: time.Second}),
		Metrics:          e.m,
		Logger:           slog.New(e.logs),
		Rand:             retry.NewRand(seed),
		Records:          e.set.Records,
		DeadLetterWindow: e.set.DeadLetterWindow,
		DeadLetterRetry:  retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3},
	}}
}

// opts are a consumer's options as the tests tune them: stream.Options,
// with the engine's view and the breaker still to be built from the
// options below (which shadow stream.Options' built ones), as
// stream.Engine builds them for the binary.
type opts struct {
	stream.Options
	// Breaker: the breaker's options (nil: none).
	Breaker *breaker.Options
	// Engine tunes the engine's view (nil: its defaults).
	Engine *engine.Options
}

// build builds o's engine view and breaker with stream.Engine.
func (o opts) build(t testing.TB) stream.Options {
	t.Helper()
	so, eo := o.Options, engine.Options{}
	if o.Engine != nil {
		eo = *o.Engine
	}
	require.NoError(t, stream.Engine(&so, eo, o.Breaker))
	return so
}

// start runs a consumer until the test ends (or stop is called).
func (e *env) start(o opts) (stop func()) {
	e.t.Helper()
	c, err := stream.New(o.build(e.t))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, e.cons) }()
	require.Eventually(e.t, c.Consuming, 5*time.Second, 5*time.Millisecond)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(e.t, <-done)
			require.NoError(e.t, e.nc.Flush())
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) publish(subject string, body string, hdr nats.Header) uint64 {
	e.t.Helper()
	ack, err := e.js.PublishMsg(e.t.Context(), &nats.Msg{Subject: subject, Data: []byte(body), Header: hdr})
	require.NoError(e.t, err)
	return ack.Sequence
}

func read(meterID string, i int) string {
	return fmt.Sprintf(`{"meter_id":%q,"read_at":"2026-11-30T07:%02d:00+01:00","quantity":"12.500","unit":"kWh"}`, meterID, i%60)
}

// settled waits until the durable has settled every read published: its
// ack floor reached the last one and nothing is pending or ack-pending.
func (e *env) settled(timeout time.Duration) {
	e.t.Helper()
	last, err := e.js.Stream(context.Background(), e.topo.Stream)
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		info, err := e.cons.Info(context.Background())
		if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
			return false
		}
		st, err := last.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= st.State.LastSeq
	}, timeout, 10*time.Millisecond, "consumer never settled")
}

// deadLetters returns every message in the dead-letter stream.
func (e *env) deadLetters() []*jetstream.RawStreamMsg {
	e.t.Helper()
	st, err := e.js.Stream(e.t.Context(), e.topo.DLQStream)
	require.NoError(e.t, err)
	info, err := st.Info(e.t.Context())
	require.NoError(e.t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(e.t.Context(), seq)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// delays returns the "delay" attribute of every "nak" record, in order.
func (l *logRecorder) delays() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, r := range l.records {
		if r.Message != "nak" {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "delay" {
				out = append(out, a.Value.Duration())
			}
			return true
		})
	}
	return out
}

func jetstreamFetchWait() jetstream.FetchOpt { return jetstream.FetchMaxWait(5 * time.Second) }

// nakUncalled delivers the durable's reads rounds times, batch at a time,
// and NAKs each delivery at once, as a replica that crashed before its calls
// (or lost them in transit) would leave them: deliveries without a call.
func (e *env) nakUncalled(rounds, batch int) {
	e.t.Helper()
	for range rounds {
		b, err := e.cons.Fetch(batch, jetstreamFetchWait())
		require.NoError(e.t, err)
		for m := range b.Messages() {
			require.NoError(e.t, m.Nak())
		}
	}
}

// logged is one log record's attributes.
type logged map[string]slog.Value

func (l logged) duration(k string) time.Duration { return l[k].Duration() }
func (l logged) uint(k string) uint64            { return l[k].Uint64() }

// byMessage returns the attributes of every record with message msg.
func (l *logRecorder) byMessage(msg string) []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logged
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		a := logged{}
		r.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value; return true })
		out = append(out, a)
	}
	return out
}

// String is every record, one a line, for a failing test's message.
func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier, _ = config.Default().Downstream.Classifier()
