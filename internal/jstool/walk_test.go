package jstool_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/jstool"
	"github.com/meterline/meter-consumer/internal/natstest"
)

// stream returns a stream S holding n messages "m1" to "mn", looked up
// after they were stored.
func stream(t *testing.T, n int) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Run(t))
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := js.Publish(t.Context(), fmt.Sprintf("s.%d", i), fmt.Appendf(nil, "m%d", i))
		require.NoError(t, err)
	}
	st, err := jstool.Lookup(t.Context(), js, "S", "stream", "--stream")
	require.NoError(t, err)
	return js, st
}

// consumers counts the consumers of S.
func consumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	info, err := js.Stream(t.Context(), "S")
	require.NoError(t, err)
	return info.CachedInfo().State.Consumers
}

// A walk sees every message stored when the stream was looked up, in
// order, none stored after, reports its progress, and deletes its consumer.
func TestWalkStopsAtTheLastMessageOfTheLookUp(t *testing.T) {
	js, st := stream(t, 5)
	var got []string
	var progress [][2]uint64
	err := jstool.Walk(t.Context(), js, st, jstool.WalkOptions{PageSize: 2, IdleWait: 200 * time.Millisecond,
		Progress: func(done, total uint64) { progress = append(progress, [2]uint64{done, total}) }},
		func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
			if md.Sequence.Stream == 2 {
				_, err := js.Publish(t.Context(), "s.late", []byte("late"))
				require.NoError(t, err)
			}
			got = append(got, string(m.Data()))
			return nil
		})
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m2", "m3", "m4", "m5"}, got)
	assert.Equal(t, [][2]uint64{{1, 5}, {2, 5}, {3, 5}, {4, 5}, {5, 5}}, progress)
	assert.Zero(t, consumers(t, js), "the walk's consumer is deleted")
}

// fn ends a walk with SkipAll without an error, and with any other error
// with that error; headers only leaves the payloads out.
func TestWalkEndsWhenFnSaysSo(t *testing.T) {
	js, st := stream(t, 5)
	var got []uint64
	err := jstool.Walk(t.Context(), js, st, jstool.WalkOptions{HeadersOnly: true},
		func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
			assert.Empty(t, m.Data())
			got = append(got, md.Sequence.Stream)
			if len(got) == 2 {
				return jstool.SkipAll
			}
			return nil
		})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2}, got)

	boom := fmt.Errorf("boom")
	err = jstool.Walk(t.Context(), js, st, jstool.WalkOptions{}, func(jetstream.Msg, *jetstream.MsgMetadata) error { return boom })
	assert.ErrorIs(t, err, boom)
	assert.Zero(t, consumers(t, js))
}

// A walk of an empty stream calls nothing; messages deleted while it
// runs end it once the server says none are left (the second may have
// reached the client before its delete).
func TestWalkOfAnEmptyOrEmptiedStream(t *testing.T) {
	js, st := stream(t, 0)
	require.NoError(t, jstool.Walk(t.Context(), js, st, jstool.WalkOptions{}, func(jetstream.Msg, *jetstream.MsgMetadata) error {
		t.Fatal("called on an empty stream")
		return nil
	}))

	js, st = stream(t, 3)
	var got []uint64
	err := jstool.Walk(t.Context(), js, st, jstool.WalkOptions{PageSize: 1, IdleWait: 100 * time.Millisecond},
		func(_ jetstream.Msg, md *jetstream.MsgMetadata) error {
			got = append(got, md.Sequence.Stream)
			if md.Sequence.Stream == 1 {
				require.NoError(t, st.DeleteMsg(t.Context(), 2))
				require.NoError(t, st.DeleteMsg(t.Context(), 3))
			}
			return nil
		})
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, uint64(1), got[0])
	assert.Subset(t, []uint64{1, 2}, got)
}

// Lookup names the stream and the flag to fix; a closed connection is
// ErrNotConnected before any request.
func TestLookupAndCheckConn(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.Run(t))
	_, err := jstool.Lookup(t.Context(), js, "NOPE", "dead-letter stream", "--dlq-stream")
	require.ErrorIs(t, err, jstool.ErrNoSuchStream)
	assert.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	assert.Contains(t, err.Error(), "dead-letter stream NOPE: no such stream (is --dlq-stream right?)")
	_, err = jstool.Lookup(t.Context(), js, "", "source stream", "--stream")
	assert.EqualError(t, err, "no such stream: source stream: no name (set --stream)")

	require.NoError(t, jstool.CheckConn(js))
	nc.Close()
	assert.ErrorIs(t, jstool.CheckConn(js), jstool.ErrNotConnected)
	assert.EqualError(t, jstool.CheckConn(nil), "not connected to NATS: no JetStream context")
}
