package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/demo"
	"github.com/meterline/meter-consumer/internal/natstest"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 7, 0, 0, 0, time.FixedZone("CET", 3600)) }

// recorder is a jetstream.Publisher that records messages, or fails them
// with err.
type recorder struct {
	jetstream.Publisher // nil: only PublishMsg is used

	err  error
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (r *recorder) PublishMsg(_ context.Context, msg *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	r.msgs = append(r.msgs, msg)
	return &jetstream.PubAck{Stream: "TEST", Sequence: uint64(len(r.msgs))}, nil
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) first(n int) []*nats.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*nats.Msg(nil), r.msgs[:n]...)
}

// run starts h.Run and returns a function that stops it and returns its error.
func run(t *testing.T, h *demo.HeadEnd) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestHeadEndPublishesToJetStream(t *testing.T) {
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name:     "METER_READS",
		Subjects: []string{"meter.reads.>"},
	})
	require.NoError(t, err)

	h := &demo.HeadEnd{
		Publisher:      js,
		Subject:        "meter.reads",
		Rate:           200,
		Meters:         50,
		InvalidPercent: 20,
		Rand:           rand.New(rand.NewPCG(1, 2)),
		Logger:         testLogger(t),
	}
	stop := run(t, h)
	require.Eventually(t, func() bool {
		valid, invalid := h.Published()
		return valid+invalid >= 100
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, stop())

	valid, invalid := h.Published()
	assert.Positive(t, valid)
	assert.Positive(t, invalid, "some invalid reads are sent")
	assert.Zero(t, h.Failed())

	info, err := stream.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(valid+invalid), info.State.Msgs, "every acknowledged read is stored once")

	regions := map[string]bool{
		"meter.reads.north": true, "meter.reads.south": true,
		"meter.reads.east": true, "meter.reads.west": true,
	}
	var gotValid, gotInvalid int64
	for seq := uint64(1); seq <= info.State.Msgs; seq++ {
		msg, err := stream.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		require.True(t, regions[msg.Subject], "subject %q", msg.Subject)
		require.True(t, strings.HasPrefix(msg.Header.Get(jetstream.MsgIDHeader), "he:MTR-"))
		if msg.Header.Get(demo.InvalidHeader) != "" {
			gotInvalid++
			continue
		}
		gotValid++

		dec := json.NewDecoder(bytes.NewReader(msg.Data))
		dec.UseNumber()
		var body map[string]any
		require.NoError(t, dec.Decode(&body), "%s", msg.Data)
		for _, field := range []string{"meter_id", "read_at", "quantity", "unit"} {
			v, ok := body[field].(string)
			require.True(t, ok, "field %s of %s", field, msg.Data)
			require.NotEmpty(t, v)
		}
		assert.Regexp(t, `^MTR-\d{5}$`, body["meter_id"])
		assert.Regexp(t, `^\d+\.\d{3}$`, body["quantity"])
		_, err = time.Parse(time.RFC3339, body["read_at"].(string))
		assert.NoError(t, err)
	}
	assert.Equal(t, valid, gotValid)
	assert.Equal(t, invalid, gotInvalid)
}

func TestHeadEndIsDeterministic(t *testing.T) {
	const n = 60
	publish := func() []*nats.Msg {
		rec := &recorder{}
		h := &demo.HeadEnd{
			Publisher:      rec,
			Subject:        "meter.reads",
			Rate:           2000,
			Meters:         10,
			InvalidPercent: 20,
			Rand:           rand.New(rand.NewPCG(42, 43)),
			Now:            fixedNow,
		}
		stop := run(t, h)
		require.Eventually(t, func() bool { return rec.len() >= n }, 10*time.Second, time.Millisecond)
		require.NoError(t, stop())
		return rec.first(n)
	}

	a, b := publish(), publish()
	ids := map[string]bool{}
	for i := range n {
		assert.Equal(t, a[i].Subject, b[i].Subject, "message %d", i)
		assert.Equal(t, string(a[i].Data), string(b[i].Data), "message %d", i)
		assert.Equal(t, a[i].Header, b[i].Header, "message %d", i)
		id := a[i].Header.Get(jetstream.MsgIDHeader)
		assert.False(t, ids[id], "message id %s reused", id)
		ids[id] = true
	}
}

func TestHeadEndCountsFailedPublishes(t *testing.T) {
	rec := &recorder{err: errors.New("no responders")}
	h := &demo.HeadEnd{
		Publisher: rec,
		Subject:   "meter.reads",
		Rate:      1000,
		Meters:    3,
		Rand:      rand.New(rand.NewPCG(1, 1)),
		Logger:    testLogger(t),
	}
	stop := run(t, h)
	require.Eventually(t, func() bool { return h.Failed() >= 5 }, 10*time.Second, time.Millisecond)
	require.NoError(t, stop(), "a failed publish is not fatal")
	valid, invalid := h.Published()
	assert.Zero(t, valid+invalid)
}

func TestHeadEndRefusesASecondRun(t *testing.T) {
	rec := &recorder{}
	h := &demo.HeadEnd{Publisher: rec, Subject: "meter.reads", Rate: 1000, Meters: 3, Rand: rand.New(rand.NewPCG(1, 1))}
	stop := run(t, h)
	require.Eventually(t, func() bool { return rec.len() > 0 }, 10*time.Second, time.Millisecond)

	err := h.Run(t.Context())
	require.ErrorIs(t, err, demo.ErrConfig)
	require.NoError(t, stop())
}

func TestHeadEndValidation(t *testing.T) {
	valid := func() *demo.HeadEnd {
		return &demo.HeadEnd{
			Publisher: &recorder{}, Subject: "meter.reads", Rate: 20, Meters: 500,
			InvalidPercent: 3, Rand: rand.New(rand.NewPCG(1, 1)),
		}
	}
	tests := []struct {
		name   string
		change func(h *demo.HeadEnd)
		want   string
	}{
		{"nil publisher", func(h *demo.HeadEnd) { h.Publisher = nil }, "Publisher is nil"},
		{"empty subject", func(h *demo.HeadEnd) { h.Subject = "" }, "Subject"},
		{"wildcard subject", func(h *demo.HeadEnd) { h.Subject = "meter.>" }, "Subject"},
		{"trailing dot", func(h *demo.HeadEnd) { h.Subject = "meter." }, "Subject"},
		{"zero rate", func(h *demo.HeadEnd) { h.Rate = 0 }, "Rate"},
		{"NaN rate", func(h *demo.HeadEnd) { h.Rate = nan() }, "Rate"},
		{"no meters", func(h *demo.HeadEnd) { h.Meters = 0 }, "Meters"},
		{"invalid percent over 100", func(h *demo.HeadEnd) { h.InvalidPercent = 101 }, "InvalidPercent"},
		{"negative invalid percent", func(h *demo.HeadEnd) { h.InvalidPercent = -1 }, "InvalidPercent"},
		{"nil rand", func(h *demo.HeadEnd) { h.Rand = nil }, "Rand is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := valid()
			tt.change(h)
			err := h.Run(t.Context())
			require.ErrorIs(t, err, demo.ErrConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}

	t.Run("valid stops with its context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, valid().Run(ctx))
	})
}
