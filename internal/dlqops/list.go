package dlqops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// flushEvery bounds the rows a table holds before it is written out (columns
// are aligned within each block of rows).
const flushEvery = 500

// List writes the copies f selects: a table, or with jsonOut one JSON object
// per line with every field, the headers and the payload.
func (o *Ops) List(ctx context.Context, f Filter, jsonOut bool) error {
	if err := f.validate(); err != nil {
		return err
	}
	st, err := o.dlqStream(ctx)
	if err != nil {
		return err
	}
	var w rowWriter
	if jsonOut {
		w = &jsonRows{enc: json.NewEncoder(o.out())}
	} else {
		w = newTable(o.out(), o.now())
	}
	if err := o.scan(ctx, st, f, scanOptions{}, w.row); err != nil {
		return err
	}
	if n, ok := w.(*table); ok && n.rows == 0 {
		_, err := fmt.Fprintf(o.out(), "no dead-lettered reads in %s match\n", o.Stream)
		return err
	}
	return w.flush()
}

type rowWriter interface {
	row(Entry) error
	flush() error
}

// table writes the List table.
type table struct {
	tw   *tabwriter.Writer
	now  time.Time
	rows int
}

func newTable(w io.Writer, now time.Time) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), now: now}
}

func (t *table) row(e Entry) error {
	if t.rows%flushEvery == 0 {
		if err := t.tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(t.tw, "SEQ\tREASON\tCAUSE\tSUBJECT\tMETER\tDELIVERIES\tREPLAYS\tAGE\tERROR")
	}
	t.rows++
	ago := "-"
	if !e.DeadLetteredAt.IsZero() {
		ago = age(t.now.Sub(e.DeadLetteredAt))
	}
	_, err := fmt.Fprintf(t.tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n",
		e.Seq, orDash(e.Reason), orDash(e.Cause), orDash(e.Subject), orDash(e.MeterID),
		e.Deliveries, e.ReplayCount, ago, firstLine(e.Error, errorWidth))
	return err
}

func (t *table) flush() error { return t.tw.Flush() }

// jsonEntry is the --json form of an Entry.
type jsonEntry struct {
	Seq            uint64              `json:"seq"`
	Reason         string              `json:"reason"`
	Cause          string              `json:"cause"`
	Subject        string              `json:"subject"`
	MeterID        string              `json:"meter_id"`
	Error          string              `json:"error"`
	Deliveries     uint64              `json:"deliveries"`
	Attempts       uint64              `json:"attempts,omitempty"`
	ReplayCount    int                 `json:"replay_count"`
	DeadLetteredAt time.Time           `json:"dead_lettered_at,omitzero"`
	PublishedAt    time.Time           `json:"published_at,omitzero"`
	Headers        map[string][]string `json:"headers"`
	Payload        *string             `json:"payload,omitempty"`        // when valid UTF-8
	PayloadBase64  []byte              `json:"payload_base64,omitempty"` // otherwise
}

func toJSON(e Entry) jsonEntry {
	j := jsonEntry{
		Seq: e.Seq, Reason: e.Reason, Cause: e.Cause, Subject: e.Subject, MeterID: e.MeterID,
		Error: e.Error, Deliveries: e.Deliveries, Attempts: e.Attempts, ReplayCount: e.ReplayCount,
		DeadLetteredAt: e.DeadLetteredAt, PublishedAt: e.PublishedAt, Headers: e.Header,
	}
	if utf8.Valid(e.Data) {
		s := string(e.Data)
		j.Payload = &s
	} else {
		j.PayloadBase64 = e.Data
	}
	return j
}

type jsonRows struct{ enc *json.Encoder }

func (j *jsonRows) row(e Entry) error { return j.enc.Encode(toJSON(e)) }
func (j *jsonRows) flush() error      { return nil }
