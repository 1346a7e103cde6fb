package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/topology"
)

// made starts a server, lets Ensure make the whole topology, and returns
// the JetStream context for a test to change what it made.
func made(t *testing.T, topo topology.Topology) jetstream.JetStream {
	t.Helper()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	_, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	return js
}

// remake deletes a stream and creates it again with cfg, as an operator
// would to change what the server cannot change in place.
func remake(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	require.NoError(t, js.DeleteStream(t.Context(), cfg.Name))
	_, err := js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)
}

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	require.NoError(t, err)
	return st.CachedInfo().Config
}

// A dead-letter stream that would lose or replace copies JetStream already
// confirmed (their reads were TERMed after) is refused at start, naming
// the setting and the fix; Reconcile changes what the server can change
// and still refuses what it cannot.
func TestTheDeadLetterStreamIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		change    func(*jetstream.StreamConfig)
		want      string
		fixable   bool
		wantAfter func(t *testing.T, c jetstream.StreamConfig)
	}{
		{"interest retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy },
			"retention is Interest", true,
			func(t *testing.T, c jetstream.StreamConfig) { assert.Equal(t, jetstream.LimitsPolicy, c.Retention) }},
		{"work-queue retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
			"retention is WorkQueue", false, nil},
		{"one copy per subject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 },
			"max msgs per subject is 1", true,
			func(t *testing.T, c jetstream.StreamConfig) { assert.Equal(t, int64(-1), c.MaxMsgsPerSubject) }},
		{"discard old", func(c *jetstream.StreamConfig) { c.Discard, c.MaxMsgs = jetstream.DiscardOld, 1000 },
			"discard is DiscardOld", true,
			func(t *testing.T, c jetstream.StreamConfig) { assert.Equal(t, jetstream.DiscardNew, c.Discard) }},
		{"subjects that miss the prefix", func(c *jetstream.StreamConfig) { c.Subjects = []string{"meter.dead.>"} },
			"subjects [meter.dead.>] do not list [meter.dlq.>]: a copy published under the dead-letter prefix finds no stream", true,
			func(t *testing.T, c jetstream.StreamConfig) { assert.Contains(t, c.Subjects, "meter.dlq.>") }},
		{"memory storage", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage },
			"storage is Memory", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			topo := testTopology()
			js := made(t, topo)
			cfg := topo.DLQStreamConfig()
			tt.change(&cfg)
			remake(t, js, cfg)

			for _, setup := range []func() (*topology.Setup, error){
				func() (*topology.Setup, error) { return topology.Lookup(t.Context(), js, topo) },
				func() (*topology.Setup, error) { return topology.Ensure(t.Context(), js, topo) },
			} {
				_, err := setup()
				require.ErrorIs(t, err, topology.ErrMismatch)
				assert.ErrorContains(t, err, "dead-letter stream METER_READS_DLQ: ")
				assert.ErrorContains(t, err, tt.want)
			}
			topo.Reconcile = true
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			set, err := topology.Lookup(ctx, js, topo)
			if !tt.fixable {
				require.ErrorIs(t, err, topology.ErrMismatch, "the server cannot change it: refused even with Reconcile")
				assert.ErrorContains(t, err, tt.want)
				assert.ErrorContains(t, err, "the server cannot change")
				return
			}
			require.NoError(t, err)
			tt.wantAfter(t, streamConfig(t, js, topo.DLQStream))
			require.Len(t, set.Reconciled, 1, "what Reconcile changed is said")
			assert.Contains(t, set.Reconciled[0], "dead-letter stream METER_READS_DLQ: "+tt.want)
			set, err = topology.Lookup(t.Context(), js, topo)
			require.NoError(t, err)
			assert.Empty(t, set.Reconciled, "converged: a second start changes nothing")
		})
	}
}

// Reconcile against a source stream whose retention the server cannot
// change (work queue) is one clear refusal, not an UpdateStream repeated
// until the stack overflows; without Reconcile it is a warning, as every
// difference in the source stream is.
func TestReconcileRefusesWhatTheServerCannotChange(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	cfg := topo.StreamConfig()
	cfg.Retention = jetstream.WorkQueuePolicy
	_, err := js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)

	set, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Contains(t, set.Warnings, "stream METER_READS: retention is WorkQueue, not Limits (left as it is; the server cannot change it)")
	assert.Len(t, set.Warnings, 1)

	topo.Reconcile = true
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = topology.Ensure(ctx, js, topo)
	require.ErrorIs(t, err, topology.ErrMismatch)
	assert.NoError(t, ctx.Err(), "refused at once, not after calling UpdateStream until the deadline")
	assert.ErrorContains(t, err, "stream METER_READS: ")
	assert.ErrorContains(t, err, "retention is WorkQueue, not Limits: the server cannot change a retention to or from work queue")
	assert.Equal(t, jetstream.WorkQueuePolicy, streamConfig(t, js, topo.Stream).Retention)
}

// Reconcile sets the ack wait its own error message recommends
// (consumer.handler_timeout must be shorter than the durable's ack wait:
// "--reconcile sets it to consumer.ack_wait"), and max ack pending with it.
func TestReconcileSetsTheAckWait(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	mine := topo
	mine.AckWait, mine.MaxAckPending = 2*time.Second, 500
	js := made(t, mine)

	set, err := topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, set.AckWait, "without Reconcile the durable's own is followed")

	topo.Reconcile = true
	set, err = topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, topo.AckWait, set.AckWait)
	assert.Equal(t, topo.MaxAckPending, set.MaxAckPending)
	assert.Equal(t, topo.AckWait, set.Consumer.CachedInfo().Config.AckWait)
	assert.Equal(t, []string{"consumer meter-consumer on stream METER_READS: ack wait 2s and max ack pending 500 set to 5s and 10000 (changed by reconciling)"},
		set.Reconciled)
}

// A paused durable delivers nothing until its pause ends: setup says until
// when, for the log and /readyz; Reconcile leaves the pause (an
// operator's act, not a setting).
func TestAPausedDurableIsSaidSo(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	js := made(t, topo)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	_, err := js.PauseConsumer(t.Context(), topo.Stream, topo.Durable, until)
	require.NoError(t, err)

	for _, reconcile := range []bool{false, true} {
		topo.Reconcile = reconcile
		set, err := topology.Lookup(t.Context(), js, topo)
		require.NoError(t, err)
		assert.True(t, until.Equal(set.PausedUntil), "paused until %s, got %s", until, set.PausedUntil)
	}
	ci, err := js.Consumer(t.Context(), topo.Stream, topo.Durable)
	require.NoError(t, err)
	assert.True(t, ci.CachedInfo().Paused, "still paused after Reconcile")
}

// The records bucket keeps a read's hand-backs and dead-letter decision
// for as long as the read can be in the stream: its TTL follows the
// source stream's own max age, not the configured one.
func TestTheRecordsTTLFollowsTheStreamsOwnMaxAge(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	topo.MaxAge = 7 * 24 * time.Hour
	cfg := topo.StreamConfig()
	cfg.MaxAge = 90 * 24 * time.Hour
	_, err := js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)

	_, err = topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	kv, err := js.KeyValue(t.Context(), topo.Bucket())
	require.NoError(t, err)
	st, err := kv.Status(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 90*24*time.Hour, st.TTL())
}

// A records bucket that forgets a record while its read can still be in
// the stream, or never forgets one, or keeps them in memory, is refused;
// Reconcile fixes what the server can change.
func TestTheRecordsBucketIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		change    func(*jetstream.KeyValueConfig)
		want      string // "" a warning, not a refusal
		warning   string
		fixable   bool
		wantAfter func(t *testing.T, s jetstream.KeyValueStatus)
	}{
		{"no ttl", func(c *jetstream.KeyValueConfig) { c.TTL = 0 },
			"ttl is unlimited", "", true,
			func(t *testing.T, s jetstream.KeyValueStatus) { assert.Equal(t, 7*24*time.Hour, s.TTL()) }},
		{"ttl shorter than the stream's max age", func(c *jetstream.KeyValueConfig) { c.TTL = time.Hour },
			"ttl is 1h0m0s, shorter than stream METER_READS's max age (168h0m0s)", "", true,
			func(t *testing.T, s jetstream.KeyValueStatus) { assert.Equal(t, 7*24*time.Hour, s.TTL()) }},
		{"memory storage", func(c *jetstream.KeyValueConfig) { c.Storage = jetstream.MemoryStorage },
			"storage is Memory", "", false, nil},
		{"history", func(c *jetstream.KeyValueConfig) { c.History = 5 },
			"", "records bucket METER_READS_meter-consumer_records: history is 5, not 1 (left as it is; reconciling would change it)", true,
			func(t *testing.T, s jetstream.KeyValueStatus) { assert.Equal(t, int64(1), s.History()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			topo := testTopology()
			topo.MaxAge = 7 * 24 * time.Hour
			js := made(t, topo)
			require.NoError(t, js.DeleteKeyValue(t.Context(), topo.Bucket()))
			cfg := topo.RecordsConfig()
			tt.change(&cfg)
			_, err := js.CreateKeyValue(t.Context(), cfg)
			require.NoError(t, err)

			set, err := topology.Lookup(t.Context(), js, topo)
			if tt.want != "" {
				require.ErrorIs(t, err, topology.ErrMismatch)
				assert.ErrorContains(t, err, "records bucket METER_READS_meter-consumer_records: ")
				assert.ErrorContains(t, err, tt.want)
			} else {
				require.NoError(t, err)
				assert.Contains(t, set.Warnings, tt.warning)
			}
			topo.Reconcile = true
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err = topology.Lookup(ctx, js, topo)
			if !tt.fixable {
				require.ErrorIs(t, err, topology.ErrMismatch, "the server cannot change it: refused even with Reconcile")
				assert.ErrorContains(t, err, "the server cannot change")
				return
			}
			require.NoError(t, err)
			kv, err := js.KeyValue(t.Context(), topo.Bucket())
			require.NoError(t, err)
			st, err := kv.Status(t.Context())
			require.NoError(t, err)
			tt.wantAfter(t, st)
		})
	}
}

// Several replicas on a server that is not clustered is a start-up error
// naming stream.replicas and both fixes, not something to wait out.
func TestReplicasTheServerCannotMakeAreNamed(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	topo.Replicas = 3
	_, err := topology.Ensure(t.Context(), js, topo)
	require.ErrorIs(t, err, topology.ErrMismatch)
	assert.ErrorContains(t, err, "create stream METER_READS: ")
	assert.ErrorContains(t, err, "stream.replicas is 3 and the server is not clustered")
	assert.ErrorContains(t, err, "or accept a single copy by setting stream.replicas to 1: ")
}

// A source stream that drops a subject's older reads past a count is
// warned of (settled or not, they are gone); Reconcile lifts the limit.
func TestASourceStreamsPerSubjectLimitIsWarned(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	topo := testTopology()
	cfg := topo.StreamConfig()
	cfg.MaxMsgsPerSubject = 5
	_, err := js.CreateStream(t.Context(), cfg)
	require.NoError(t, err)

	set, err := topology.Ensure(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, []string{"stream METER_READS: max msgs per subject is 5, not unlimited: the server deletes the older messages of a subject past it, settled or not (left as it is; reconciling would change it)"},
		set.Warnings)
	topo.Reconcile = true
	_, err = topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), streamConfig(t, js, topo.Stream).MaxMsgsPerSubject)
}

// Discard old on a dead-letter stream without a limit discards nothing (a
// stream made with `nats stream add`'s defaults): a warning, not a refusal.
func TestDiscardOldWithoutALimitIsAWarning(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	js := made(t, topo)
	cfg := topo.DLQStreamConfig()
	cfg.Discard = jetstream.DiscardOld
	remake(t, js, cfg)

	set, err := topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
	assert.Equal(t, []string{"dead-letter stream METER_READS_DLQ: discard is DiscardOld, not DiscardNew (left as it is; reconciling would change it)"}, set.Warnings)
}

// A max age on the dead-letter stream is an operator's retention, not a
// defect: the service starts, warns once naming it, and keeps it under
// Reconcile. Subjects wider than the prefix cover it.
func TestADeadLetterMaxAgeIsKept(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	js := made(t, topo)
	cfg := topo.DLQStreamConfig()
	cfg.MaxAge = 30 * 24 * time.Hour
	cfg.Subjects = []string{"meter.>"} // wider than meter.dlq.>, and not the source stream's meter.reads.>
	remake(t, js, streamConfig(t, js, topo.DLQStream))
	_, err := js.UpdateStream(t.Context(), cfg)
	if err != nil { // the source stream owns meter.reads.>: overlapping subjects are refused by the server
		cfg.Subjects = []string{"meter.dlq.>"}
		_, err = js.UpdateStream(t.Context(), cfg)
	}
	require.NoError(t, err)
	for _, reconcile := range []bool{false, true} {
		topo.Reconcile = reconcile
		set, err := topology.Lookup(t.Context(), js, topo)
		require.NoError(t, err, "reconcile %v", reconcile)
		require.Len(t, set.Warnings, 1)
		assert.Contains(t, set.Warnings[0], "dead-letter stream METER_READS_DLQ: max age is 720h0m0s")
		assert.Contains(t, set.Warnings[0], "MeterConsumerDeadLettersNearMaxAge")
		assert.Empty(t, set.Reconciled)
		assert.Equal(t, 30*24*time.Hour, streamConfig(t, js, topo.DLQStream).MaxAge, "kept")
	}
}

// A source stream holding subjects the service does not consume is
// refused: its reads there would never be delivered, and the audit would
// count them billed below the ack floor. Reconcile cannot mend it (the
// service never removes subjects).
func TestASourceStreamWithSubjectsNotConsumedIsRefused(t *testing.T) {
	t.Parallel()
	topo := testTopology()
	js := made(t, topo)
	cfg := streamConfig(t, js, topo.Stream)
	cfg.Subjects = append(cfg.Subjects, "meter.events.>")
	_, err := js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	for _, reconcile := range []bool{false, true} {
		topo.Reconcile = reconcile
		_, err := topology.Lookup(t.Context(), js, topo)
		require.ErrorIs(t, err, topology.ErrMismatch, "reconcile %v", reconcile)
		assert.ErrorContains(t, err, "include [meter.events.>], which stream.subjects [meter.reads.>] does not cover")
		assert.ErrorContains(t, err, "set stream.subjects to meter.reads.>,meter.events.>")
	}
	topo.Reconcile = false
	topo.Subjects = []string{"meter.reads.>", "meter.events.>"}
	_, err = topology.Lookup(t.Context(), js, topo)
	require.ErrorIs(t, err, topology.ErrMismatch, "the durable consumes less: refused until it is reconciled")
	topo.Reconcile = true
	_, err = topology.Lookup(t.Context(), js, topo)
	require.NoError(t, err)
}
