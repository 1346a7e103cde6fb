package stream

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/engine"
)

// docRow is a row of docs/SETTLEMENT.md's settlement table.
type docRow struct{ situation, fate, outcome string }

// settlementRows reads the settlement table of docs/SETTLEMENT.md.
func settlementRows(t *testing.T) []docRow {
	t.Helper()
	f, err := os.Open("../../docs/SETTLEMENT.md")
	require.NoError(t, err)
	defer f.Close()
	var rows []docRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| situation | fate |"):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			require.Len(t, cells, 4, "row %q", line)
			rows = append(rows, docRow{strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]),
				strings.Trim(strings.TrimSpace(cells[3]), "`")})
		case in:
			return rows
		}
	}
	require.NoError(t, sc.Err())
	return rows
}

// what is the part of a verdict a row asserts.
type what struct {
	fate      fate
	reason    dlq.Reason
	cause     classify.Cause
	own       bool
	backoff   uint64
	floor     time.Duration
	uncharged string
	credit    bool
	await     bool
	within    time.Duration
	gated     bool
	copyErr   error
}

func whatOf(v verdict) what {
	w := what{fate: v.fate, reason: v.reason, own: v.own, backoff: v.backoff, floor: v.floor, uncharged: v.uncharged, credit: v.credit,
		await: v.await, within: v.within, gated: v.gated, copyErr: v.copyErr}
	if v.cause != nil {
		w.cause = v.cause.Cause
	}
	return w
}

// The settlement table of docs/SETTLEMENT.md, row by row: each situation's
// fate and outcome as the doc states them, and the verdict decide gives.
// Rows without a doc name are the edges between the doc's rows.
func TestSettlementTable(t *testing.T) {
	t.Parallel()
	shed := classify.Of(binaryClassifier.Status(503, "5")) // Retry-After: 5
	require.Equal(t, 5*time.Second, shed.RetryAfter)
	failed := classify.Of(binaryClassifier.Status(500, ""))
	refused := classify.Of(binaryClassifier.Status(422, ""))
	// called is a read at attempt a of 6 (its deliveries d) after a call
	// that failed with ce.
	called := func(a, d uint64, ce *classify.Error) situation {
		return situation{attempt: a, deliveries: d, maxAttempts: 6, creditable: true, called: true, failure: ce}
	}
	with := func(s situation, f func(*situation)) situation { f(&s); return s }
	decided := &Decision{Reason: dlq.ReasonPermanent, Class: "permanent", Cause: classify.CauseHTTP422, Error: "http_422"}
	awaiting := &Decision{Reason: dlq.ReasonExhausted, Class: "transient", Cause: classify.CauseHTTP503, Error: "http_503: downstream answered 503"}

	tests := []struct {
		row  string // the situation as docs/SETTLEMENT.md names it; "" for an edge
		name string
		s    situation
		want what
	}{
		{row: "success (2xx to the POST)", s: called(1, 1, nil), want: what{fate: fateAck}},
		{row: "transient, attempts left", s: called(2, 3, failed),
			want: what{fate: fateRetry, cause: classify.CauseHTTP500, own: true, backoff: 2, gated: true}},
		{name: "a shed with attempts left while the engine does not shed broadly", s: called(2, 3, shed),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 2, floor: 5 * time.Second, gated: true}},
		{row: "transient at the last attempt", s: called(6, 6, failed),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP500, own: true}},
		{row: "transient at the last attempt, while the engine serves no one and fails other reads too",
			s:    with(called(6, 8, failed), func(s *situation) { s.down = true }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP500, own: true, backoff: 8, uncharged: whyDown, credit: true, gated: true}},
		{name: "the engine down at the last attempt, without a record",
			s:    with(called(6, 8, failed), func(s *situation) { s.down, s.creditable = true, false }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP500, own: true}},
		{row: "a shed (503, 429, timeout, connection, 502, 504) while the engine sheds its load, attempts left",
			s:    with(called(2, 5, shed), func(s *situation) { s.shedding = true }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 5, floor: 5 * time.Second, uncharged: whyShedding, credit: true, gated: true}},
		{name: "a shed while the engine sheds its load, without a record",
			s:    with(called(2, 5, shed), func(s *situation) { s.shedding, s.creditable = true, false }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 2, floor: 5 * time.Second, gated: true}},
		{name: "a read's own failure while the engine sheds its load is charged",
			s:    with(called(2, 5, failed), func(s *situation) { s.shedding = true }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP500, own: true, backoff: 2, gated: true}},
		{name: "a shed at the last attempt while the engine refuses most, no verdict of load, is the read's last",
			s:    with(called(6, 6, shed), func(s *situation) { s.shedding = true }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503, own: true}},
		{row: "a shed at the last attempt while a verdict of load stands",
			s:    with(called(6, 7, shed), func(s *situation) { s.shedding, s.loaded = true, true }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 7, floor: 5 * time.Second, uncharged: whyShedding, credit: true, gated: true}},
		{name: "a shed at the last attempt while a verdict of load stands, without a record",
			s:    with(called(6, 7, shed), func(s *situation) { s.shedding, s.loaded, s.creditable = true, true, false }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503, own: true}},
		{name: "a read's own failure at the last attempt while a verdict of load stands is its last",
			s:    with(called(6, 7, failed), func(s *situation) { s.shedding, s.loaded = true, true }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP500, own: true}},
		{row: "a shed at the last attempt while a trial of the engine runs",
			s:    with(called(6, 7, shed), func(s *situation) { s.trying, s.awaitLeft = true, 4*time.Second }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 7, floor: 5 * time.Second, uncharged: whyTrial, credit: true, await: true, within: 4 * time.Second, gated: true}},
		{name: "a shed at the last attempt while a trial runs, without a record",
			s:    with(called(6, 7, shed), func(s *situation) { s.trying, s.awaitLeft, s.creditable = true, 4*time.Second, false }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503, own: true}},
		{name: "a read's own failure at the last attempt while a trial runs is its last",
			s:    with(called(6, 7, failed), func(s *situation) { s.trying, s.awaitLeft = true, 4*time.Second }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP500, own: true}},
		{name: "a shed with attempts left while a trial runs is charged, as before the trial",
			s:    with(called(2, 3, shed), func(s *situation) { s.trying, s.awaitLeft = true, 4*time.Second }),
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, own: true, backoff: 2, floor: 5 * time.Second, gated: true}},
		{row: "the next delivery of a read whose last shed awaits a verdict, a verdict of load standing",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, verdict: engine.Load},
			want: what{fate: fateCall}},
		{row: "the next delivery of a read whose last shed awaits a verdict, the trial still running, within its span",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, trying: true, awaitLeft: 3 * time.Second},
			want: what{fate: fateRetry, cause: classify.CauseHTTP503, backoff: 8, within: 3 * time.Second}},
		{name: "awaiting a verdict, the trial still running past its span",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, trying: true, awaitLeft: -time.Millisecond},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503}},
		{row: "the next delivery of a read whose last shed awaits a verdict: the reads' own, no verdict, the trial's span past, or more than 10 deliveries reached no call",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, verdict: engine.Own},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503}},
		{name: "awaiting a verdict, the reads' own found while another trial runs",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, verdict: engine.Own, trying: true, awaitLeft: time.Second},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503}},
		{name: "awaiting a verdict, no trial and none found",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503}},
		{name: "awaiting a verdict of load past the deliveries that may reach no call",
			s:    situation{attempt: 7, deliveries: 18, maxAttempts: 6, awaiting: awaiting, verdict: engine.Load},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseHTTP503}},
		{name: "a decision on record goes before one awaiting a verdict",
			s:    situation{attempt: 6, deliveries: 8, maxAttempts: 6, awaiting: awaiting, verdict: engine.Load, decided: decided},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422}},
		{row: "transient, the read older than `retry.max_read_age`",
			s:    with(called(1, 1, failed), func(s *situation) { s.expired = true }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExpired, cause: classify.CauseHTTP500, own: true}},
		{name: "expired while the breaker is open",
			s:    with(called(1, 1, failed), func(s *situation) { s.expired, s.outage = true, true }),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExpired, cause: classify.CauseHTTP500, own: true}},
		{row: "permanent (400/422 …)", s: called(1, 1, refused),
			want: what{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422, own: true}},
		{row: "invalid read (any attempt)", s: situation{attempt: 9, deliveries: 9, maxAttempts: 6, invalid: errors.New("bad")},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: classify.CauseUnknown, own: true}},
		{row: "attempt past the limit (the calls on record spent the attempts, or more than 10 deliveries reached no call)",
			s:    situation{attempt: 7, deliveries: 7, maxAttempts: 6},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: classify.CauseUnsettled, own: true}},
		{name: "at the last attempt, before the call", s: situation{attempt: 6, deliveries: 9, maxAttempts: 6},
			want: what{fate: fateCall}},
		{row: "transient while the breaker is open, or of a probe",
			s:    with(called(6, 6, failed), func(s *situation) { s.outage = true }),
			want: what{fate: fateCall, cause: classify.CauseHTTP500, own: true, uncharged: whyBreaker}},
		{row: "the fate was decided by an earlier delivery, on any replica, but its copy is missing",
			s:    situation{attempt: 2, deliveries: 2, maxAttempts: 6, decided: decided, invalid: errors.New("not looked at")},
			want: what{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422}},
		{row: "the decision to dead-letter written to the record (or one written first by another delivery of the read)",
			s:    with(called(6, 6, failed), func(s *situation) { s.recorded = decided }),
			want: what{fate: fateCopy, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422}},
		{row: "the copy confirmed by JetStream",
			s:    with(called(6, 6, failed), func(s *situation) { s.recorded, s.copied = decided, true }),
			want: what{fate: fateTerm, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422}},
		{row: "the copy not confirmed (a publish that failed, or the server refused it)",
			s: with(called(6, 9, failed), func(s *situation) {
				s.recorded, s.copied, s.copyErr, s.copyFloor = decided, true, dlq.ErrRejected, 4*time.Second
			}),
			want: what{fate: fateRetry, reason: dlq.ReasonPermanent, cause: classify.CauseHTTP422, backoff: 9, floor: 4 * time.Second, copyErr: dlq.ErrRejected}},
		{row: "the stop's deadline cut the call, or the stop began while the read waited for the breaker or the limit",
			s:    with(called(6, 6, nil), func(s *situation) { s.stopped = errStopping }),
			want: what{fate: fateHandBack, cause: classify.CauseShutdown, own: true}},
		{row: "not a JetStream delivery (no metadata to count attempts by)", s: situation{noMetadata: true},
			want: what{fate: fateReject}},
		{row: "the delivery's lease ran out (the connection down, or the process stalled, a quarter of the ack wait or more since it arrived) before its fate was carried out",
			s:    with(called(6, 6, failed), func(s *situation) { s.lost = true }),
			want: what{fate: fateDrop}},
		{name: "a lease lost while the decision is written, before the copy",
			s:    with(called(6, 6, failed), func(s *situation) { s.recorded, s.lost = decided, true }),
			want: what{fate: fateDrop}},
	}

	doc := settlementRows(t)
	var named []string
	for _, tt := range tests {
		if tt.row != "" {
			named = append(named, tt.row)
		}
	}
	var documented []string
	for _, r := range doc {
		documented = append(documented, r.situation)
	}
	require.Equal(t, documented, named, "the doc's rows, in order")
	byRow := map[string]docRow{}
	for _, r := range doc {
		byRow[r.situation] = r
	}

	for _, tt := range tests {
		name := tt.row
		if name == "" {
			name = tt.name
		}
		t.Run(name, func(t *testing.T) {
			v := decide(tt.s)
			assert.Equal(t, tt.want, whatOf(v))
			if tt.row == "" {
				return
			}
			r := byRow[tt.row]
			f := v.fate.String()
			if v.credit {
				f += ", credited"
			}
			assert.Equal(t, r.fate, f, "the doc's fate")
			out := string(v.fate.outcome())
			if out == "" {
				out = "(none)"
			}
			assert.Equal(t, r.outcome, out, "the doc's outcome")
		})
	}
}
