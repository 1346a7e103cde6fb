package audit

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// DefaultSortMemory bounds, in bytes, the records a sorter holds before it
// spills them to a temporary file as a sorted run.
const DefaultSortMemory = 32 << 20

// recordOverhead is what a record costs in memory beside its bytes.
const recordOverhead = 64

// record is one entry of a sorter: ordered by key, then by val.
type record struct{ key, val []byte }

func compareRecords(a, b record) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return bytes.Compare(a.val, b.val)
}

// sorter is an external merge sort: records are added in any order and
// read back sorted. It holds at most about limit bytes of records; past
// that it sorts them and writes them to a run in a temporary file under
// dir, and the runs are merged when read. Memory is bounded by limit plus
// a read buffer per run, whatever the number of records.
type sorter struct {
	dir   string
	limit int
	mem   []record
	size  int
	runs  []*os.File
	n     uint64
}

func newSorter(dir string, limit int) *sorter {
	if limit <= 0 {
		limit = DefaultSortMemory
	}
	return &sorter{dir: dir, limit: limit}
}

// add copies key and val into the sorter.
func (s *sorter) add(key, val []byte) error {
	buf := make([]byte, len(key)+len(val))
	copy(buf, key)
	copy(buf[len(key):], val)
	s.mem = append(s.mem, record{key: buf[:len(key):len(key)], val: buf[len(key):]})
	s.size += len(buf) + recordOverhead
	s.n++
	if s.size >= s.limit {
		return s.spill()
	}
	return nil
}

// spill writes the records in memory to a sorted run.
func (s *sorter) spill() error {
	if len(s.mem) == 0 {
		return nil
	}
	slices.SortFunc(s.mem, compareRecords)
	f, err := os.CreateTemp(s.dir, "meter-audit-run-*")
	if err != nil {
		return fmt.Errorf("spill sorted run: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: gone when closed, even after a crash
	w := bufio.NewWriterSize(f, 64<<10)
	var hdr [2 * binary.MaxVarintLen64]byte
	for _, r := range s.mem {
		n := binary.PutUvarint(hdr[:], uint64(len(r.key)))
		n += binary.PutUvarint(hdr[n:], uint64(len(r.val)))
		if _, err := w.Write(hdr[:n]); err != nil {
			break
		}
		w.Write(r.key)
		w.Write(r.val)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("spill sorted run: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("spill sorted run: %w", err)
	}
	s.runs = append(s.runs, f)
	s.mem, s.size = nil, 0
	return nil
}

// close removes the runs.
func (s *sorter) close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs, s.mem = nil, nil
}

// spilled reports how many runs went to disk.
func (s *sorter) spilled() int { return len(s.runs) }

// iterator returns the records in order. The sorter takes no more records.
func (s *sorter) iterator() (*sortedIter, error) {
	it := &sortedIter{}
	if len(s.runs) == 0 {
		slices.SortFunc(s.mem, compareRecords)
		it.mem = s.mem
		return it, nil
	}
	if err := s.spill(); err != nil {
		return nil, err
	}
	for _, f := range s.runs {
		src := &runReader{r: bufio.NewReaderSize(f, 64<<10)}
		ok, err := src.next()
		if err != nil {
			return nil, err
		}
		if ok {
			it.h = append(it.h, src)
		}
	}
	heap.Init(&it.h)
	return it, nil
}

// sortedIter yields the records of a sorter in order, merging its runs.
type sortedIter struct {
	mem     []record
	h       runHeap
	cur     record
	started bool
	err     error
}

// peek returns the next record without consuming it.
func (it *sortedIter) peek() (record, bool) {
	if it.mem != nil || it.h == nil {
		if len(it.mem) == 0 {
			return record{}, false
		}
		return it.mem[0], true
	}
	if len(it.h) == 0 {
		return record{}, false
	}
	return it.h[0].cur, true
}

// next consumes and returns the next record.
func (it *sortedIter) next() (record, bool) {
	if it.mem != nil || it.h == nil {
		if len(it.mem) == 0 {
			return record{}, false
		}
		r := it.mem[0]
		it.mem = it.mem[1:]
		return r, true
	}
	if len(it.h) == 0 {
		return record{}, false
	}
	src := it.h[0]
	r := src.cur
	ok, err := src.next()
	switch {
	case err != nil:
		it.err = err
		it.h = it.h[:0]
	case ok:
		heap.Fix(&it.h, 0)
	default:
		heap.Pop(&it.h)
	}
	return r, true
}

// runReader reads one sorted run.
type runReader struct {
	r   *bufio.Reader
	cur record
}

func (rr *runReader) next() (bool, error) {
	kl, err := binary.ReadUvarint(rr.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read sorted run: %w", err)
	}
	vl, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return false, fmt.Errorf("read sorted run: %w", err)
	}
	buf := make([]byte, kl+vl)
	if _, err := io.ReadFull(rr.r, buf); err != nil {
		return false, fmt.Errorf("read sorted run: %w", err)
	}
	rr.cur = record{key: buf[:kl:kl], val: buf[kl:]}
	return true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return compareRecords(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
