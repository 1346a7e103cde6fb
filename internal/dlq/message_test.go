package dlq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

func TestBuildKeepsPayloadAndHeaders(t *testing.T) {
	orig := nats.Header{
		"Nats-Msg-Id":                 {"he-1"},
		"Nats-Expected-Stream":        {"X"},
		"Nats-Expected-Last-Sequence": {"9"},
		"Nats-TTL":                    {"1h"},
		"Nats-Rollup":                 {"sub"},
		"Nats-Schedule":               {"@at 2026-12-01T00:00:00Z"},
		"Nats-Schedule-Target":        {"x"},
		"Nats-Batch-Id":               {"b1"},
		"Nats-Batch-Sequence":         {"1"},
		"X-Head-End":                  {"he-7", "he-8"},
	}
	data := []byte(`{"meter_id":"MTR-1"}`)
	published := time.Date(2026, 11, 30, 7, 0, 0, 123, time.FixedZone("CET", 3600))
	now := time.Date(2026, 11, 30, 7, 5, 0, 456, time.UTC)
	m := dlq.Build("meter.dlq", dlq.Entry{
		Reason: dlq.ReasonPermanent, Cause: "http_422", Err: errors.New("downstream answered 422"),
		Stream: "METER_READS", Consumer: "meter-consumer", Subject: "meter.reads.north",
		Sequence: 42, Deliveries: 3, Attempts: 2, PublishedAt: published, Header: orig, Data: data,
	}, now)

	assert.Equal(t, "meter.dlq.meter.reads.north", m.Subject)
	assert.Equal(t, data, m.Data)
	want := nats.Header{
		"X-Head-End":           {"he-7", "he-8"},
		"Dlq-Original-Msg-Id":  {"he-1"},
		"Dlq-Reason":           {"permanent"},
		"Dlq-Cause":            {"http_422"},
		"Dlq-Error":            {"downstream answered 422"},
		"Dlq-Stream":           {"METER_READS"},
		"Dlq-Consumer":         {"meter-consumer"},
		"Dlq-Subject":          {"meter.reads.north"},
		"Dlq-Sequence":         {"42"},
		"Dlq-Deliveries":       {"3"},
		"Dlq-Attempts":         {"2"},
		"Dlq-Published-At":     {"2026-11-30T06:00:00.000000123Z"},
		"Dlq-Dead-Lettered-At": {"2026-11-30T07:05:00.000000456Z"},
		"Nats-Msg-Id":          {"dlq:METER_READS:42:1796018400000000123"},
		"Dlq-Dropped-Headers": {"Nats-Batch-Id,Nats-Batch-Sequence,Nats-Expected-Last-Sequence,Nats-Expected-Stream," +
			"Nats-Rollup,Nats-Schedule,Nats-Schedule-Target,Nats-TTL"},
	}
	assert.Equal(t, want, m.Header)
	assert.Equal(t, []string{"he-1"}, orig["Nats-Msg-Id"], "the original headers are not modified")
}

func TestOneLine(t *testing.T) {
	tests := []struct {
		name string
		give string
		n    int
		want string
	}{
		{"short", "boom", 10, "boom"},
		{"newlines folded", "a\nb\r\nc\td", 20, "a b  c d"},
		{"exact fit", "abcde", 5, "abcde"},
		{"cut marked", "abcdefgh", 6, "abc..."},
		{"cut on a rune boundary", "ééééé", 8, "éé..."},
		{"invalid utf-8", "a\xffb", 10, "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dlq.OneLine(tt.give, tt.n)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), tt.n)
		})
	}
	long := dlq.OneLine(strings.Repeat("x", 5000), dlq.MaxErrorLen)
	assert.Len(t, long, dlq.MaxErrorLen)
}

func ExampleBuild() {
	m := dlq.Build("meter.dlq", dlq.Entry{
		Reason: dlq.ReasonExhausted, Cause: "http_503", Err: errors.New("downstream answered 503"),
		Stream: "METER_READS", Consumer: "meter-consumer", Subject: "meter.reads.north",
		Sequence: 7, Deliveries: 6, PublishedAt: time.Date(2026, 11, 30, 6, 59, 0, 0, time.UTC), Data: []byte(`{}`),
	}, time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))
	fmt.Println(m.Subject)
	for _, h := range []string{"Dlq-Reason", "Dlq-Cause", "Dlq-Deliveries", "Nats-Msg-Id"} {
		fmt.Printf("%s: %s\n", h, m.Header.Get(h))
	}
	// Output:
	// meter.dlq.meter.reads.north
	// Dlq-Reason: exhausted
	// Dlq-Cause: http_503
	// Dlq-Deliveries: 6
	// Nats-Msg-Id: dlq:METER_READS:7:1796021940000000000
}

// A mark carries the read's name as a copy does, what was done, by whom,
// when and why, and reads back as it was built.
func TestMarkRoundTrip(t *testing.T) {
	t.Parallel()
	m := dlq.Mark{Kind: dlq.MarkPurged, Stream: "METER_READS", Sequence: 42, Subject: "meter.reads.north",
		PublishedAt: time.Date(2026, 11, 30, 6, 0, 0, 123, time.UTC), CopySequence: 7,
		By: "ops-alice", At: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Why: "meter decommissioned\nticket 42"}
	msg := dlq.BuildMark("meter.dlq", m)
	assert.Equal(t, "meter.dlq._mark.meter.reads.north", msg.Subject)
	assert.True(t, dlq.IsMark(msg.Header))
	assert.Equal(t, "mark:purged:METER_READS:7", msg.Header.Get("Nats-Msg-Id"))
	got, ok := dlq.ParseMark(msg.Header)
	require.True(t, ok)
	m.Why = "meter decommissioned ticket 42" // one line
	assert.Equal(t, m, got)

	copyMsg := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Stream: "METER_READS", Subject: "meter.reads.north", Sequence: 42}, time.Now())
	assert.False(t, dlq.IsMark(copyMsg.Header), "a copy is not a mark")
	_, ok = dlq.ParseMark(copyMsg.Header)
	assert.False(t, ok)
}

// BenchmarkBuild builds the dead-letter copy of a read that failed with a
// 422 and carried three headers, one of them dropped and one moved.
func BenchmarkBuild(b *testing.B) {
	e := dlq.Entry{
		Reason: dlq.ReasonPermanent, Cause: classify.CauseHTTP422,
		Err:    errors.New("downstream answered 422 Unprocessable Entity: quantity scale exceeds the tariff's"),
		Stream: "METER_READS", Consumer: "meter-consumer", Subject: "meter.reads.north",
		Sequence: 1234567, Deliveries: 1, PublishedAt: time.Date(2026, 11, 30, 7, 0, 1, 0, time.UTC),
		Header: nats.Header{
			nats.MsgIdHdr:          []string{"head-end-7:000042"},
			"Nats-Expected-Stream": []string{"METER_READS"},
			"Head-End":             []string{"north-substation-07"},
		},
		Data: []byte(`{"meter_id":"MTR-0000042","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh"}`),
	}
	now := time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if m := dlq.Build("meter.dlq", e, now); m.Subject == "" {
			b.Fatal("no subject")
		}
	}
}

// Every header nats-server acts on when a message is published is left off
// a copy: the list is the server's own constants, not one written from
// memory.
func TestServerHeadersAreTheServersOwn(t *testing.T) {
	acted := []string{
		server.JSMsgId, server.JSExpectedStream, server.JSExpectedLastSeq, server.JSExpectedLastSubjSeq,
		server.JSExpectedLastSubjSeqSubj, server.JSExpectedLastMsgId, server.JSStreamSource,
		server.JSMsgRollup, server.JSMessageTTL, server.JSMarkerReason, server.JSMessageIncr,
		server.JSMessageCounterSources, server.JSBatchId, server.JSBatchSeq, server.JSBatchCommit,
		server.JSSchedulePattern, server.JSScheduleTimeZone, server.JSScheduleTTL, server.JSScheduleRollup,
		server.JSScheduleTarget, server.JSScheduleSource, server.JSScheduler, server.JSScheduleNext,
		server.JSRequiredApiLevel, server.MsgTraceDest, server.MsgTraceHop, server.MsgTraceOriginAccount,
		server.MsgTraceOnly, server.KVOperation, server.JSStream, server.JSSequence, server.JSTimeStamp,
		server.JSSubject, server.JSLastSequence, server.JSNumPending,
	}
	for _, h := range acted {
		assert.True(t, dlq.ServerHeader(h), h)
	}
	for _, h := range []string{"X-Head-End", "Traceparent", "Content-Type", "Natsy", "Dlq-Reason", "Idempotency-Key"} {
		assert.False(t, dlq.ServerHeader(h), h)
	}
	assert.True(t, dlq.ServerHeader("nats-batch-id"), "matched without regard to case")
}

// Dlq-Dead-Lettered-At is the entry's time (the decision's, on the NATS
// server's clock) when it has one, whatever the clock Build is given; the
// clock's otherwise.
func TestBuildStampsTheDecisionTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	decided := time.Date(2026, 11, 30, 6, 59, 58, 123, time.FixedZone("x", 3600))
	m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Subject: "meter.reads.r1", At: decided}, now)
	assert.Equal(t, "2026-11-30T05:59:58.000000123Z", m.Header.Get(dlq.HeaderDeadLetteredAt))
	m = dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Subject: "meter.reads.r1"}, now)
	assert.Equal(t, "2026-11-30T07:00:00.000000000Z", m.Header.Get(dlq.HeaderDeadLetteredAt))
}

// An original's header named as one the copy sets, in any case, gives way
// to the copy's: the copy never carries two names that differ only in case.
func TestBuildReplacesTheOriginalsProvenanceHeaders(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	m := dlq.Build("meter.dlq", dlq.Entry{Reason: dlq.ReasonPermanent, Subject: "meter.reads.r1",
		Header: nats.Header{"Dlq-Cause": {"spoof"}, "dlq-reason": {"spoof-lower"}, "Dlq-Replay-Count": {"2"}, "X-Head-End": {"he-1"}}}, now)
	assert.Equal(t, []string{"permanent"}, m.Header[dlq.HeaderReason])
	assert.NotContains(t, m.Header, "dlq-reason")
	assert.Equal(t, []string{""}, m.Header[dlq.HeaderCause], "the entry's (none here), not the original's")
	assert.Equal(t, []string{"2"}, m.Header["Dlq-Replay-Count"], "a replay's count is the original's to carry")
	assert.Equal(t, []string{"he-1"}, m.Header["X-Head-End"])
}
