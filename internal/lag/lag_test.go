package lag_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
)

// gather returns every metric of reg by name (a gauge's or a counter's value).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return got
}

// bucket is the records bucket the tests' topology makes.
const bucket = "METER_READS_meter-consumer_records"

// topology creates METER_READS with cfg's limits, METER_READS_DLQ holding
// a mark then a copy, the records bucket, and the durable (explicit ack,
// MaxAckPending 500, filter).
func topology(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig, filter string) jetstream.Consumer {
	t.Helper()
	_, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bucket, History: 1})
	require.NoError(t, err)
	cfg.Name, cfg.Subjects = "METER_READS", []string{"meter.reads.>"}
	_, err = js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "METER_READS_DLQ", Subjects: []string{"meter.dlq.>"}, MaxBytes: 1 << 30, MaxAge: 30 * 24 * time.Hour})
	require.NoError(t, err)
	_, err = js.Publish(t.Context(), "meter.dlq._mark.meter.reads.x", nil) // a mark: not a copy, older
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the copy stored later (a timeline)
	_, err = js.Publish(t.Context(), "meter.dlq.meter.reads.x", []byte("{}"))
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(t.Context(), "METER_READS", jetstream.ConsumerConfig{
		Durable: "meter-consumer", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 500, FilterSubject: filter})
	require.NoError(t, err)
	return cons
}

func publish(t *testing.T, js jetstream.JetStream, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		_, err := js.Publish(t.Context(), s, []byte(`{}`))
		require.NoError(t, err)
	}
}

// fetch takes n deliveries and acks the first ack of them.
func fetch(t *testing.T, cons jetstream.Consumer, n, ack int) {
	t.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	i := 0
	for m := range batch.Messages() {
		if i < ack {
			require.NoError(t, m.DoubleAck(t.Context()))
		}
		i++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, n, i)
}

func TestReadExportsTheBacklogAndTheStream(t *testing.T) {
	const north, south = "meter.reads.north", "meter.reads.south"
	limits := jetstream.StreamConfig{MaxAge: time.Hour, MaxBytes: 1 << 20, MaxMsgs: 1000, Discard: jetstream.DiscardNew}
	tests := []struct {
		name    string
		stream  jetstream.StreamConfig
		filter  string
		publish []string
		fetch   int // delivered, and the first ack of them acked
		ack     int
		delete  uint64 // a stream sequence deleted before the reading
		oldest  uint64 // the sequence whose age is expected; 0: none pending
		want    map[string]float64
	}{
		{
			name: "ack floor 0: the first read is the oldest", stream: limits,
			publish: []string{north, north, north, north, north}, fetch: 2, oldest: 1,
			want: map[string]float64{"pending_messages": 3, "ack_pending_messages": 2, "stream_messages": 5,
				"stream_max_messages": 1000, "stream_max_bytes": 1 << 20, "stream_max_age_seconds": 3600, "stream_discard_new": 1},
		},
		{
			name: "direct get, and a deleted read after the floor is skipped", stream: withDirect(limits),
			publish: []string{north, north, north, north, north}, fetch: 2, ack: 2, delete: 3, oldest: 4,
			want: map[string]float64{"pending_messages": 2, "stream_messages": 4,
				"stream_max_messages": 1000, "stream_max_bytes": 1 << 20, "stream_max_age_seconds": 3600, "stream_discard_new": 1},
		},
		{
			name: "a filtered durable: the oldest read it selects", stream: jetstream.StreamConfig{},
			filter: north, publish: []string{south, south, north, south, north}, oldest: 3,
			want: map[string]float64{"pending_messages": 2, "stream_messages": 5,
				"stream_max_messages": -1, "stream_max_bytes": -1},
		},
		{
			name: "everything settled: age 0, unlimited stream", stream: jetstream.StreamConfig{},
			publish: []string{north, north}, fetch: 2, ack: 2,
			want: map[string]float64{"stream_messages": 2, "stream_max_messages": -1, "stream_max_bytes": -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, js := natstest.Connect(t, natstest.Run(t))
			cons := topology(t, js, tt.stream, tt.filter)
			publish(t, js, tt.publish...)
			if tt.fetch > 0 {
				fetch(t, cons, tt.fetch, tt.ack)
			}
			s, err := js.Stream(t.Context(), "METER_READS")
			require.NoError(t, err)
			if tt.delete > 0 {
				require.NoError(t, s.DeleteMsg(t.Context(), tt.delete))
				ci, err := cons.Info(t.Context())
				require.NoError(t, err)
				require.Less(t, ci.AckFloor.Stream, tt.delete, "the deleted read is after the ack floor")
			}
			// The server's count of a durable's pending reads can trail the
			// stored messages for a moment (seen here: 2 pending of 5, 2 ack
			// pending): wait until it agrees with the case, then read.
			require.Eventually(t, func() bool {
				ci, err := cons.Info(t.Context())
				return err == nil && float64(ci.NumPending) == tt.want["pending_messages"] &&
					float64(ci.NumAckPending) == tt.want["ack_pending_messages"]
			}, 5*time.Second, 10*time.Millisecond, "the durable's counts")
			now := time.Now()
			want := map[string]float64{"max_ack_pending": 500, "dead_letter_stream_messages": 2, "dead_letter_stream_max_bytes": 1 << 30,
				"records_bucket_present": 1}
			if tt.oldest > 0 {
				m, err := s.GetMsg(t.Context(), tt.oldest)
				require.NoError(t, err)
				now = m.Time.Add(90 * time.Second)
				want["oldest_unacked_age_seconds"] = 90
			}
			si, err := s.Info(t.Context())
			require.NoError(t, err)
			want["stream_bytes"] = float64(si.State.Bytes)
			dl, err := js.Stream(t.Context(), "METER_READS_DLQ")
			require.NoError(t, err)
			want["dead_letter_stream_bytes"] = float64(dl.CachedInfo().State.Bytes)
			require.Positive(t, want["dead_letter_stream_bytes"])
			want["backlog_read_timestamp_seconds"] = float64(now.UnixMilli()) / 1000
			want["dead_letter_stream_max_age_seconds"] = dl.CachedInfo().Config.MaxAge.Seconds()
			copyMsg, err := dl.GetMsg(t.Context(), 2)
			require.NoError(t, err)
			want["dead_letter_oldest_age_seconds"] = now.Sub(copyMsg.Time).Seconds()
			require.Less(t, want["dead_letter_oldest_age_seconds"], now.Sub(dl.CachedInfo().State.FirstTime).Seconds(), "the mark, older, is left out")
			require.Positive(t, want["dead_letter_stream_max_age_seconds"], "the copies' retention is read")

			reg := prometheus.NewRegistry()
			r := lag.New(lag.JetStream{JS: js, Stream: "METER_READS", Durable: "meter-consumer", DLQName: "METER_READS_DLQ",
				CopySubjects: []string{"meter.dlq.meter.reads.>"}, Bucket: bucket},
				reg, time.Minute, retry.NewRand(1), nil)
			lag.SetNow(r, func() time.Time { return now })
			require.NoError(t, r.Read(t.Context()))

			full := map[string]float64{}
			for _, name := range []string{"pending_messages", "ack_pending_messages", "redelivered_messages",
				"max_ack_pending", "dead_letter_stream_messages", "lag_read_errors_total", "stream_messages",
				"stream_bytes", "stream_max_messages", "stream_max_bytes", "stream_max_age_seconds",
				"stream_discard_new", "oldest_unacked_age_seconds", "backlog_read_timestamp_seconds",
				"dead_letter_stream_bytes", "dead_letter_stream_max_bytes", "dead_letter_stream_max_age_seconds",
				"dead_letter_oldest_age_seconds", "records_bucket_present"} {
				full["meter_consumer_"+name] = want[name] + tt.want[name]
			}
			assert.Equal(t, full, gather(t, reg))
			problems, err := testutil.GatherAndLint(reg)
			require.NoError(t, err)
			assert.Empty(t, problems)
		})
	}
}

func withDirect(c jetstream.StreamConfig) jetstream.StreamConfig {
	c.AllowDirect = true
	return c
}

// partial is a Source whose consumer info fails and whose streams answer.
type partial struct{}

func (partial) ConsumerInfo(context.Context) (*jetstream.ConsumerInfo, error) {
	return nil, jetstream.ErrConsumerNotFound
}

func (partial) StreamInfo(context.Context) (*jetstream.StreamInfo, error) {
	return &jetstream.StreamInfo{State: jetstream.StreamState{Msgs: 7}, Config: jetstream.StreamConfig{MaxMsgs: -1}}, nil
}

func (partial) GetMsg(context.Context, uint64, string) (*jetstream.RawStreamMsg, error) {
	return nil, errors.New("not asked: the consumer info failed")
}

func (partial) DeadLetterInfo(context.Context) (*jetstream.StreamInfo, error) {
	return &jetstream.StreamInfo{State: jetstream.StreamState{Msgs: 2}}, nil
}

func (partial) OldestCopy(context.Context, uint64) (*jetstream.RawStreamMsg, error) {
	return nil, jetstream.ErrMsgNotFound
}

func (partial) RecordsBucket(context.Context) error { return nil }

func (partial) Names() lag.Names { return lag.Names{} }

func TestReadRefreshesWhatItCan(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := lag.New(partial{}, reg, time.Minute, retry.NewRand(1), nil)
	err := r.Read(t.Context())
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
	assert.ErrorContains(t, err, "consumer info: ")
	got := gather(t, reg)
	assert.Equal(t, 1.0, got["meter_consumer_lag_read_errors_total"])
	assert.Equal(t, 7.0, got["meter_consumer_stream_messages"])
	assert.Equal(t, 2.0, got["meter_consumer_dead_letter_stream_messages"])
	assert.Equal(t, 1.0, got["meter_consumer_records_bucket_present"])
	assert.Zero(t, got["meter_consumer_backlog_read_timestamp_seconds"], "the backlog was never read: its reading is as old as can be")
}

type failing struct{ calls chan struct{} }

func (f failing) ConsumerInfo(context.Context) (*jetstream.ConsumerInfo, error) {
	f.calls <- struct{}{}
	return nil, context.DeadlineExceeded
}

func (failing) StreamInfo(context.Context) (*jetstream.StreamInfo, error) {
	return nil, context.DeadlineExceeded
}

func (failing) GetMsg(context.Context, uint64, string) (*jetstream.RawStreamMsg, error) {
	return nil, context.DeadlineExceeded
}

func (failing) DeadLetterInfo(context.Context) (*jetstream.StreamInfo, error) {
	return nil, context.DeadlineExceeded
}

func (failing) OldestCopy(context.Context, uint64) (*jetstream.RawStreamMsg, error) {
	return nil, context.DeadlineExceeded
}

func (failing) RecordsBucket(context.Context) error { return context.DeadlineExceeded }

func (failing) Names() lag.Names { return lag.Names{} }

func TestRunIsJitteredAndStops(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := failing{calls: make(chan struct{}, 100)}
	r := lag.New(src, reg, 20*time.Millisecond, retry.NewRand(1), nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return len(src.calls) >= 3 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.GreaterOrEqual(t, gather(t, reg)["meter_consumer_lag_read_errors_total"], 12.0, "four requests fail per reading")
}
