package lag_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
)

const bucketPresent = "meter_consumer_records_bucket_present"

// present returns the records_bucket_present series' value, and whether
// reg has that series at all.
func present(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, bucketPresent)
	require.NoError(t, err)
	if n == 0 {
		return 0, false
	}
	require.Equal(t, 1, n, "one series, without a label of its own")
	return gather(t, reg)[bucketPresent], true
}

// logLines returns the lines of a JSON log whose message is msg.
func logLines(t *testing.T, log *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(log.Bytes()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), string(line))
		if m[slog.MessageKey] == msg {
			out = append(out, m)
		}
	}
	return out
}

const (
	goneMsg  = "the records bucket is gone: a read's record (calls made, sheds, a dead-letter decision) can be neither stored nor read until it is made again"
	againMsg = "the records bucket is there again"
)

// TestRecordsBucketPresentFollowsTheBucket: on a real server the gauge has
// no series before the first reading, reads 1 while the records bucket is
// there, 0 once it is deleted (a warning logged once, however many
// readings find it gone, with the bucket, stream and durable), and 1
// again once it is made again; none of it is a reading error.
func TestRecordsBucketPresentFollowsTheBucket(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Run(t))
	topology(t, js, jetstream.StreamConfig{}, "")
	var logged bytes.Buffer
	reg := prometheus.NewRegistry()
	r := lag.New(lag.JetStream{JS: js, Stream: "METER_READS", Durable: "meter-consumer", DLQName: "METER_READS_DLQ",
		CopySubjects: []string{"meter.dlq.meter.reads.>"}, Bucket: bucket},
		reg, time.Minute, retry.NewRand(1), slog.New(slog.NewJSONHandler(&logged, nil)))

	_, ok := present(t, reg)
	assert.False(t, ok, "a series before the first reading")

	read := func(want float64, why string) {
		t.Helper()
		require.NoError(t, r.Read(t.Context()), why)
		v, ok := present(t, reg)
		require.True(t, ok, why)
		assert.Equal(t, want, v, why)
	}
	read(1, "the bucket is there")
	require.NoError(t, js.DeleteKeyValue(t.Context(), bucket))
	read(0, "the bucket deleted")
	read(0, "still gone")
	read(0, "still gone")
	gone := logLines(t, &logged, goneMsg)
	require.Len(t, gone, 1, "logged once, not at every reading")
	assert.Equal(t, "WARN", gone[0][slog.LevelKey])
	assert.Equal(t, bucket, gone[0]["bucket"])
	assert.Equal(t, "METER_READS", gone[0]["stream"])
	assert.Equal(t, "meter-consumer", gone[0]["durable"])
	assert.Empty(t, logLines(t, &logged, againMsg))

	_, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bucket, History: 1})
	require.NoError(t, err)
	read(1, "the bucket made again")
	read(1, "still there")
	assert.Len(t, logLines(t, &logged, againMsg), 1, "its return logged once")
	assert.Len(t, logLines(t, &logged, goneMsg), 1)
	assert.Zero(t, gather(t, reg)["meter_consumer_lag_read_errors_total"], "a bucket gone is an answer, not a failed reading")
}

// scripted is a Source whose records bucket look-ups answer in turn what
// it holds; the durable has nothing pending, the streams answer.
type scripted struct {
	partial
	answers []error
}

func (*scripted) ConsumerInfo(context.Context) (*jetstream.ConsumerInfo, error) {
	return &jetstream.ConsumerInfo{}, nil
}

func (s *scripted) RecordsBucket(context.Context) error {
	err := s.answers[0]
	s.answers = s.answers[1:]
	return err
}

func (*scripted) Names() lag.Names {
	return lag.Names{Stream: "METER_READS", Durable: "meter-consumer", Bucket: bucket}
}

// TestRecordsBucketLookUpFailures: a look-up that fails other than by the
// server saying the bucket does not exist leaves the gauge as it was (no
// series when it is the first) and counts as a failed request of the
// reading; only "not found", as nats.go says it (stream or bucket, however
// wrapped), reads 0.
func TestRecordsBucketLookUpFailures(t *testing.T) {
	src := &scripted{answers: []error{
		context.DeadlineExceeded,
		nil,
		context.DeadlineExceeded,
		fmt.Errorf("look up: %w", jetstream.ErrStreamNotFound),
		nats.ErrNoResponders,
		jetstream.ErrBucketNotFound,
		nil,
	}}
	var logged bytes.Buffer
	reg := prometheus.NewRegistry()
	r := lag.New(src, reg, time.Minute, retry.NewRand(1), slog.New(slog.NewJSONHandler(&logged, nil)))
	steps := []struct {
		fails   bool
		present bool
		want    float64
		errors  float64
		why     string
	}{
		{fails: true, errors: 1, why: "the first look-up times out: still no series"},
		{present: true, want: 1, errors: 1, why: "found"},
		{fails: true, present: true, want: 1, errors: 2, why: "a time-out keeps 1"},
		{present: true, want: 0, errors: 2, why: "stream not found, wrapped"},
		{fails: true, present: true, want: 0, errors: 3, why: "no responders keeps 0"},
		{present: true, want: 0, errors: 3, why: "bucket not found"},
		{present: true, want: 1, errors: 3, why: "found again"},
	}
	for _, s := range steps {
		err := r.Read(t.Context())
		if s.fails {
			require.Error(t, err, s.why)
			assert.ErrorContains(t, err, "records bucket: ", s.why)
		} else {
			require.NoError(t, err, s.why)
		}
		v, ok := present(t, reg)
		assert.Equal(t, s.present, ok, s.why)
		assert.Equal(t, s.want, v, s.why)
		assert.Equal(t, s.errors, gather(t, reg)["meter_consumer_lag_read_errors_total"], s.why)
	}
	assert.Len(t, logLines(t, &logged, goneMsg), 1, "gone once: a failed look-up in between is no change")
	assert.Len(t, logLines(t, &logged, againMsg), 1)
}
