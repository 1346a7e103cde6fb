package topology_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// A durable an operator made with settings the service cannot keep its
// promises on is refused, naming the field and the fix; Reconcile
// updates it. Settings the server cannot change are refused either way.
func TestAnExistingDurableIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		change    func(*jetstream.ConsumerConfig)
		want      string
		fixable   bool
		wantAfter func(t *testing.T, c jetstream.ConsumerConfig)
	}{
		{"max deliver", func(c *jetstream.ConsumerConfig) { c.MaxDeliver = 3 },
			"max_deliver is 3", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.Equal(t, -1, c.MaxDeliver) }},
		{"backoff", func(c *jetstream.ConsumerConfig) {
			c.BackOff = []time.Duration{time.Second, 5 * time.Second}
			c.MaxDeliver = 5
		},
			"backoff is [1s 5s]", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.Empty(t, c.BackOff) }},
		{"another filter", func(c *jetstream.ConsumerConfig) { c.FilterSubjects = []string{"meter.reads.north"} },
			"it consumes [meter.reads.north], the service is configured for [meter.reads.>]", true,
			func(t *testing.T, c jetstream.ConsumerConfig) {
				assert.Equal(t, []string{"meter.reads.>"}, c.FilterSubjects)
			}},
		{"ack none", func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckNonePolicy },
			"ack_policy is AckNone", false, nil},
		{"headers only", func(c *jetstream.ConsumerConfig) { c.HeadersOnly = true },
			"headers_only is true: every read would arrive without its body", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.False(t, c.HeadersOnly) }},
		{"max request batch", func(c *jetstream.ConsumerConfig) { c.MaxRequestBatch = 10 },
			"max_request_batch is 10, below the 32 reads one pull asks for", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.Equal(t, 32, c.MaxRequestBatch) }},
		{"max request expires", func(c *jetstream.ConsumerConfig) { c.MaxRequestExpires = time.Second },
			"max_request_expires is 1s, below the 5s a pull waits on the server", true,
			func(t *testing.T, c jetstream.ConsumerConfig) {
				assert.Equal(t, stream.PullExpiry, c.MaxRequestExpires)
			}},
		{"inactive threshold", func(c *jetstream.ConsumerConfig) { c.InactiveThreshold = time.Hour },
			"inactive_threshold is 1h0m0s: the server deletes the durable", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.Zero(t, c.InactiveThreshold) }},
		{"unlimited ack pending", func(c *jetstream.ConsumerConfig) { c.MaxAckPending = -1 },
			"max_ack_pending is -1 (unlimited)", true,
			func(t *testing.T, c jetstream.ConsumerConfig) { assert.Equal(t, 10000, c.MaxAckPending) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, topo := withoutDurable(t)
			cfg := topo.ConsumerConfig()
			cfg.FilterSubjects = nil // as an operator would make it: all of the stream
			tt.change(&cfg)
			_, err := js.CreateConsumer(t.Context(), topo.Stream, cfg)
			require.NoError(t, err)

			for _, setup := range []func() (*topology.Setup, error){
				func() (*topology.Setup, error) { return topology.Lookup(t.Context(), js, topo) },
				func() (*topology.Setup, error) { return topology.Ensure(t.Context(), js, topo) },
			} {
				_, err = setup()
				require.ErrorIs(t, err, topology.ErrMismatch)
				assert.ErrorContains(t, err, tt.want)
			}
			topo.Reconcile = true
			set, err := topology.Lookup(t.Context(), js, topo)
			if !tt.fixable {
				require.ErrorIs(t, err, topology.ErrMismatch, "the server cannot change it: refused even with Reconcile")
				return
			}
			require.NoError(t, err)
			tt.wantAfter(t, set.Consumer.CachedInfo().Config)
		})
	}
}

// The ack wait the service keeps reads alive by is the durable's own.
func TestTheDurablesOwnAckWaitIsFollowed(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	made := topo
	made.AckWait, made.MaxAckPending = 45*time.Second, 500
	_, err := topology.Ensure(t.Context(), js, made)
	require.NoError(t, err)

	set, err := topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, set.AckWait)
	assert.Equal(t, 500, set.MaxAckPending)
}

// Ensure creates what is missing and never changes what
// operators set on an existing stream; a difference is a warning, and
// Reconcile applies the configured settings (adding subjects, never
// removing one).
func TestExistingStreamsAreLeftAsTheyAre(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	topo.MaxAge = 7 * 24 * time.Hour
	topo.Subjects = []string{"meter.reads.>", "meter.estimates.>"} // a stream's subjects are all consumed (TestASourceStreamWithSubjectsNotConsumedIsRefused)
	mine := topo.StreamConfig()
	mine.Subjects = []string{"meter.reads.>", "meter.estimates.>"}
	mine.MaxAge, mine.Duplicates, mine.Discard = 90*24*time.Hour, 2*time.Minute, jetstream.DiscardOld
	_, err := js.CreateStream(t.Context(), mine)
	require.NoError(t, err)

	set, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), topo.Stream)
	require.NoError(t, err)
	got := st.CachedInfo().Config
	assert.Equal(t, mine.Subjects, got.Subjects)
	assert.Equal(t, mine.MaxAge, got.MaxAge)
	assert.Equal(t, mine.Duplicates, got.Duplicates)
	assert.Equal(t, []string{
		"stream METER_READS: discard is DiscardOld, not DiscardNew (left as it is; reconciling would change it)",
		"stream METER_READS: max age is 2160h0m0s, not 168h0m0s (left as it is; reconciling would change it)",
		"stream METER_READS: duplicate window is 2m0s, not 10m0s (left as it is; reconciling would change it)",
	}, set.Warnings, "one warning per difference")

	topo.Reconcile = true
	set, err = topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Empty(t, set.Warnings)
	st, err = js.Stream(t.Context(), topo.Stream)
	require.NoError(t, err)
	got = st.CachedInfo().Config
	assert.Equal(t, mine.Subjects, got.Subjects, "a subject is never removed")
	assert.Equal(t, topo.MaxAge, got.MaxAge)
	assert.Equal(t, jetstream.DiscardNew, got.Discard)
}

// To Lookup, the records bucket must exist like the streams,
// and the error says how to make it.
func TestAMissingRecordsBucketIsNamed(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	_, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	require.NoError(t, js.DeleteKeyValue(t.Context(), topo.Bucket()))

	_, err = topology.Lookup(t.Context(), js, topo)
	require.ErrorIs(t, err, topology.ErrMissing)
	assert.ErrorContains(t, err, "records bucket METER_READS_meter-consumer_records")
	assert.ErrorContains(t, err, "nats kv add METER_READS_meter-consumer_records --history 1")
}

// The dead-letter duplicate window has no default in this package (the
// binary's is config's dlq.duplicates): a topology without one is refused
// by name, before anything is created.
func TestATopologyWithoutADeadLetterWindowIsRefused(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	topo.DLQDuplicates = 0
	_, err := topology.Ensure(t.Context(), js, topo)
	require.ErrorContains(t, err, "DLQDuplicates")
	_, err = js.Stream(t.Context(), topo.DLQStream)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "nothing is created")
}

// Created streams have bounded retention and refuse new messages when
// full rather than discard old ones.
func TestCreatedStreamsAreBounded(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	topo.MaxAge, topo.DLQMaxBytes = 7*24*time.Hour, 1<<30
	src, dl := topo.StreamConfig(), topo.DLQStreamConfig()
	assert.Equal(t, 7*24*time.Hour, src.MaxAge)
	assert.Equal(t, jetstream.DiscardNew, src.Discard)
	assert.Equal(t, int64(-1), src.MaxBytes)
	assert.Zero(t, dl.MaxAge, "a copy waits for a person")
	assert.Equal(t, int64(1<<30), dl.MaxBytes)
	assert.Equal(t, jetstream.DiscardNew, dl.Discard)
	assert.Equal(t, 7*24*time.Hour, topo.RecordsConfig().TTL, "a record lives as long as its read can")
}

// A durable whose deliver policy started past reads the stream still holds
// is refused, by every policy but all: those reads were never delivered,
// and the audit would count them billed. The server cannot change a
// deliver policy, so Reconcile refuses it too. A durable that skipped
// nothing the stream holds (made on an empty stream) is warned about.
func TestADurableThatSkipsReadsIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *jetstream.ConsumerConfig, sixth time.Time)
		want   string
	}{
		{"new", func(c *jetstream.ConsumerConfig, _ time.Time) { c.DeliverPolicy = jetstream.DeliverNewPolicy }, "deliver_policy is new"},
		{"last", func(c *jetstream.ConsumerConfig, _ time.Time) { c.DeliverPolicy = jetstream.DeliverLastPolicy }, "deliver_policy is last"},
		{"last per subject", func(c *jetstream.ConsumerConfig, _ time.Time) {
			c.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
		},
			"deliver_policy is last_per_subject"},
		{"by start sequence", func(c *jetstream.ConsumerConfig, _ time.Time) {
			c.DeliverPolicy, c.OptStartSeq = jetstream.DeliverByStartSequencePolicy, 6
		}, "deliver_policy is by_start_sequence (from sequence 6)"},
		{"by start time", func(c *jetstream.ConsumerConfig, sixth time.Time) {
			c.DeliverPolicy, c.OptStartTime = jetstream.DeliverByStartTimePolicy, &sixth
		}, "deliver_policy is by_start_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			js, topo := withoutDurable(t)
			for i := range 5 {
				_, err := js.Publish(t.Context(), fmt.Sprintf("meter.reads.m%d", i), []byte("{}"))
				require.NoError(t, err)
			}
			time.Sleep(10 * time.Millisecond) // the durable starts after the fifth read (a timeline)
			cfg := topo.ConsumerConfig()
			tt.change(&cfg, time.Now())
			_, err := js.CreateConsumer(t.Context(), topo.Stream, cfg)
			require.NoError(t, err)
			for i := range 5 {
				_, err := js.Publish(t.Context(), fmt.Sprintf("meter.reads.m%d", i), []byte("{}"))
				require.NoError(t, err)
			}

			for _, reconcile := range []bool{false, true} {
				topo.Reconcile = reconcile
				_, err = topology.Lookup(t.Context(), js, topo)
				require.ErrorIs(t, err, topology.ErrMismatch, "reconcile %v", reconcile)
				assert.ErrorContains(t, err, tt.want)
				assert.ErrorContains(t, err, "were never delivered, and `consumer audit` would count them billed")
				assert.ErrorContains(t, err, "from sequence 1")
			}
		})
	}

	t.Run("nothing skipped", func(t *testing.T) {
		t.Parallel()
		js, topo := withoutDurable(t)
		cfg := topo.ConsumerConfig()
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
		_, err := js.CreateConsumer(t.Context(), topo.Stream, cfg)
		require.NoError(t, err)
		_, err = js.Publish(t.Context(), "meter.reads.m1", []byte("{}"))
		require.NoError(t, err)
		set, err := topology.Lookup(t.Context(), js, topo)
		require.NoError(t, err)
		require.Len(t, set.Warnings, 1)
		assert.Contains(t, set.Warnings[0], "deliver_policy is new")
		assert.Contains(t, set.Warnings[0], "none was skipped")
	})
}

// withoutDurable is a server with the topology Ensure makes, less its
// durable: for a test to make the durable as someone else would.
func withoutDurable(t *testing.T) (jetstream.JetStream, topology.Topology) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Run(t))
	topo := testTopology()
	_, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	require.NoError(t, js.DeleteConsumer(t.Context(), topo.Stream, topo.Durable))
	return js, topo
}
