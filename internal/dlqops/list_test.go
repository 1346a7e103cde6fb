package dlqops_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/dlqops"
)

// tableSeqs returns the SEQ column of a List table.
func tableSeqs(t *testing.T, out string) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "SEQ" || f[0] == "no" || f[0] == "dry" || f[0] == "seq" {
			continue
		}
		seq, err := strconv.ParseUint(f[0], 10, 64)
		require.NoError(t, err, "line %q", line)
		seqs = append(seqs, seq)
	}
	return seqs
}

func TestListFilters(t *testing.T) {
	e := newEnv(t, reads()...)
	tests := []struct {
		name string
		f    dlqops.Filter
		want []uint64
	}{
		{"everything", dlqops.Filter{}, []uint64{1, 2, 3, 4, 5}},
		{"reason", dlqops.Filter{Reason: "permanent"}, []uint64{1, 3, 5}},
		{"cause", dlqops.Filter{Cause: "http_422"}, []uint64{1, 5}},
		{"reason and cause", dlqops.Filter{Reason: "exhausted", Cause: "http_503"}, []uint64{2}},
		{"subject exact", dlqops.Filter{Subject: "meter.reads.north"}, []uint64{1, 2}},
		{"subject star", dlqops.Filter{Subject: "meter.reads.*"}, []uint64{1, 2, 3, 5}},
		{"subject star in the middle", dlqops.Filter{Subject: "meter.*.south"}, []uint64{3}},
		{"subject tail", dlqops.Filter{Subject: "meter.reads.>"}, []uint64{1, 2, 3, 4, 5}},
		{"subject tail below", dlqops.Filter{Subject: "meter.reads.south.>"}, []uint64{4}},
		{"meter", dlqops.Filter{Meter: "MTR-1"}, []uint64{1, 4}},
		{"since, inclusive", dlqops.Filter{Since: base.Add(-2 * time.Hour)}, []uint64{2, 3, 4, 5}},
		{"until, inclusive", dlqops.Filter{Until: base.Add(-2 * time.Hour)}, []uint64{1, 2}},
		{"since and until", dlqops.Filter{Since: base.Add(-2 * time.Hour), Until: base.Add(-time.Hour)}, []uint64{2, 3}},
		{"limit", dlqops.Filter{Limit: 2}, []uint64{1, 2}},
		{"limit counts matches", dlqops.Filter{Reason: "permanent", Limit: 2}, []uint64{1, 3}},
		{"nothing", dlqops.Filter{Cause: "http_418"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.out.Reset()
			require.NoError(t, e.ops.List(t.Context(), tt.f, false))
			assert.Equal(t, tt.want, tableSeqs(t, e.out.String()))
			if tt.want == nil {
				assert.Equal(t, "no dead-lettered reads in METER_READS_DLQ match\n", e.out.String())
			}

			e.out.Reset()
			require.NoError(t, e.ops.List(t.Context(), tt.f, true))
			var got []uint64
			for _, line := range strings.Split(strings.TrimSpace(e.out.String()), "\n") {
				if line == "" {
					continue
				}
				var j struct{ Seq uint64 }
				require.NoError(t, json.Unmarshal([]byte(line), &j))
				got = append(got, j.Seq)
			}
			assert.Equal(t, tt.want, got, "--json selects the same")
		})
	}
}

func TestListTable(t *testing.T) {
	e := newEnv(t, reads()...)
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{}, false))
	lines := strings.Split(strings.TrimRight(e.out.String(), "\n"), "\n")
	require.Len(t, lines, 6)
	assert.Equal(t, []string{"SEQ", "REASON", "CAUSE", "SUBJECT", "METER", "DELIVERIES", "REPLAYS", "AGE", "ERROR"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"2", "exhausted", "http_503", "meter.reads.north", "MTR-2", "6", "0", "2h0m",
		"http_503:", "downstream", "answered", "503", "Service", "Unavailable"}, strings.Fields(lines[2]))
	assert.Equal(t, []string{"3", "permanent", "invalid_payload", "meter.reads.south", "-", "1", "0", "1h30m"},
		strings.Fields(lines[3])[:8], "a payload that is not JSON has no meter")

	row4 := lines[4]
	errCol := row4[strings.Index(lines[0], "ERROR"):]
	assert.LessOrEqual(t, len(errCol), 60, "long errors are cut")
	assert.True(t, strings.HasSuffix(errCol, "..."), errCol)
	assert.True(t, strings.HasPrefix(errCol, `timeout: Post "https://rating.example.com`), errCol)
}

func TestListJSON(t *testing.T) {
	e := newEnv(t, reads()...)
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{Subject: "meter.reads.*", Limit: 3}, true))
	sc := bufio.NewScanner(e.out)
	var rows []map[string]any
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		rows = append(rows, m)
	}
	require.Len(t, rows, 3)

	first := rows[0]
	assert.EqualValues(t, 1, first["seq"])
	assert.Equal(t, "permanent", first["reason"])
	assert.Equal(t, "http_422", first["cause"])
	assert.Equal(t, "meter.reads.north", first["subject"])
	assert.Equal(t, "MTR-1", first["meter_id"])
	assert.Contains(t, first["error"], "downstream answered 422")
	assert.EqualValues(t, 1, first["deliveries"])
	assert.EqualValues(t, 0, first["replay_count"])
	assert.Equal(t, "2026-11-30T04:00:00Z", first["dead_lettered_at"])
	assert.Equal(t, "2026-11-30T03:59:00Z", first["published_at"])
	assert.Equal(t, string(payload("MTR-1")), first["payload"])
	headers := first["headers"].(map[string]any)
	assert.Equal(t, []any{"he-7", "he-8"}, headers["X-Head-End"])
	assert.Equal(t, []any{"he-1"}, headers["Dlq-Original-Msg-Id"])
	assert.Equal(t, []any{"dlq:METER_READS:101:1796011140000000000"}, headers["Nats-Msg-Id"])

	invalid := rows[2]
	assert.EqualValues(t, 3, invalid["seq"])
	assert.Empty(t, invalid["meter_id"])
	assert.NotContains(t, invalid, "payload", "not UTF-8")
	raw, err := base64.StdEncoding.DecodeString(invalid["payload_base64"].(string))
	require.NoError(t, err)
	assert.Equal(t, []byte("\xff not a read"), raw)
}

func TestInvalidFilters(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		f    dlqops.Filter
	}{
		{"empty token", dlqops.Filter{Subject: "meter..north"}},
		{"tail not last", dlqops.Filter{Subject: "meter.>.north"}},
		{"wildcard inside a token", dlqops.Filter{Subject: "meter.re*"}},
		{"space", dlqops.Filter{Subject: "meter. reads"}},
		{"until before since", dlqops.Filter{Since: base, Until: base.Add(-time.Hour)}},
		{"negative limit", dlqops.Filter{Limit: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, e.ops.List(t.Context(), tt.f, false), dlqops.ErrInvalid)
			assert.ErrorIs(t, e.ops.Stats(t.Context(), tt.f, false), dlqops.ErrInvalid)
			_, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: tt.f})
			assert.ErrorIs(t, err, dlqops.ErrInvalid)
			_, err = e.ops.Purge(t.Context(), tt.f, "", func(int) bool { return true })
			assert.ErrorIs(t, err, dlqops.ErrInvalid)
		})
	}
}

// TestManyCopies pages through more copies than one page and one table
// block, with holes left by deleted copies, including the last one.
func TestManyCopies(t *testing.T) {
	const n = 1200
	e := newEnv(t)
	for i := range n {
		cause := "http_503"
		if i%3 == 0 {
			cause = "http_422"
		}
		m := dlq.Build("meter.dlq", dlq.Entry{
			Reason: dlq.ReasonPermanent, Cause: classify.Cause(cause), Stream: srcName,
			Subject: fmt.Sprintf("meter.reads.r%d", i%7), Sequence: uint64(i + 1), Data: payload(fmt.Sprintf("MTR-%d", i)),
		}, base.Add(-time.Hour))
		_, err := e.js.PublishMsgAsync(m)
		require.NoError(t, err)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publish did not complete")
	}
	for _, seq := range []uint64{1, 500, 501, n} {
		require.NoError(t, e.dlq.DeleteMsg(t.Context(), seq))
	}

	// The end is seen from the last copy's pending count, without waiting
	// for a copy that will not come: with an hour's idle wait, a scan that
	// waited would run into the deadline.
	e.ops.IdleWait = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.ops.List(ctx, dlqops.Filter{}, false), "the end is seen without waiting")
	seqs := tableSeqs(t, e.out.String())
	assert.Len(t, seqs, n-4)
	assert.Equal(t, uint64(2), seqs[0])
	assert.Equal(t, uint64(n-1), seqs[len(seqs)-1])
	assert.Equal(t, 3, strings.Count(e.out.String(), "SEQ "), "a header every 500 rows")

	s, err := e.ops.CollectStats(t.Context(), dlqops.Filter{Cause: "http_422"})
	require.NoError(t, err)
	assert.Equal(t, n/3-1, s.Total, "1200/3 minus seq 1")

	e.out.Reset()
	require.NoError(t, e.ops.List(t.Context(), dlqops.Filter{Meter: "MTR-1000"}, false))
	assert.Equal(t, []uint64{1001}, tableSeqs(t, e.out.String()))

	sum, err := e.ops.Replay(t.Context(), dlqops.ReplayOptions{Filter: dlqops.Filter{Subject: "meter.reads.r3"}, Rate: 1e6})
	require.NoError(t, err)
	assert.Equal(t, n/7-1, sum.Replayed, "171 on r3, seq 501 deleted")
	info, err := e.src.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(n/7-1), info.State.Msgs)

	// No scan leaves its ordered consumer behind.
	names := e.dlq.ConsumerNames(t.Context())
	var left []string
	for name := range names.Name() {
		left = append(left, name)
	}
	require.NoError(t, names.Err())
	assert.Empty(t, left)
}
