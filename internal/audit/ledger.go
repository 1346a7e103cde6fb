package audit

import (
	"bufio"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Ledger is the rate engine's own record of what it billed: one
// idempotency key per line, or, with Column set, a CSV file with a header
// row whose column Column holds the key.
type Ledger struct {
	Name   string    // for messages, e.g. the file's path
	R      io.Reader // the ledger's content
	Column string    // the CSV column holding the key; "" = one key a line
}

// bom is a UTF-8 byte order mark, which a ledger exported by a spreadsheet
// may start with; it is no part of the first key or column name.
const bom = "\ufeff"

// LedgerColumns returns the header row of a CSV ledger, so that a column
// named wrongly is refused before the audit walks the streams.
func LedgerColumns(r io.Reader) ([]string, error) { return headerRow(csv.NewReader(r)) }

// headerRow reads a CSV ledger's header row, without a byte order mark;
// none (nil) for an empty ledger.
func headerRow(r *csv.Reader) ([]string, error) {
	head, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("header row: %w", err)
	}
	if len(head) > 0 {
		head[0] = strings.TrimPrefix(head[0], bom)
	}
	return head, nil
}

// readLedger adds every key of l to s, valued by its line number.
func readLedger(l Ledger, s *sorter) error {
	if l.Column == "" {
		return readLines(l, s)
	}
	return readCSV(l, s)
}

func lineVal(line uint64) []byte { return binary.BigEndian.AppendUint64(nil, line) }

func readLines(l Ledger, s *sorter) error {
	sc := bufio.NewScanner(l.R)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var line uint64
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, bom) // a spreadsheet's export may start with one
		}
		key := strings.TrimSpace(text)
		if key == "" {
			continue
		}
		if err := s.add([]byte(key), lineVal(line)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("engine ledger %s: line %d: %w", l.Name, line+1, err)
	}
	return nil
}

func readCSV(l Ledger, s *sorter) error {
	r := csv.NewReader(l.R)
	r.ReuseRecord = true
	r.FieldsPerRecord = -1
	head, err := headerRow(r)
	if err != nil {
		return fmt.Errorf("engine ledger %s: %w", l.Name, err)
	}
	if head == nil {
		return nil
	}
	col := slices.Index(head, l.Column)
	if col < 0 {
		return fmt.Errorf("%w: engine ledger %s: no column %q in its header row (%s); set --engine-ledger-column to one of them",
			ErrInvalid, l.Name, l.Column, strings.Join(head, ","))
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			return fmt.Errorf("engine ledger %s: %w", l.Name, err)
		}
		if col >= len(rec) {
			return fmt.Errorf("%w: engine ledger %s: line %d has no column %q", ErrInvalid, l.Name, line, l.Column)
		}
		key := strings.TrimSpace(rec[col])
		if key == "" {
			continue
		}
		if err := s.add([]byte(key), lineVal(uint64(line))); err != nil {
			return err
		}
	}
}
