package audit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSorterSpillsAndMerges: whatever the memory, the records come back
// in order, all of them, and a small memory spills runs.
func TestSorterSpillsAndMerges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var want []string
	for range 2000 {
		want = append(want, fmt.Sprintf("K-%d", rng.IntN(500))) // repeats too
	}
	tests := []struct {
		name     string
		limit    int
		wantRuns bool
	}{
		{"in memory", 1 << 20, false},
		{"a run per 16 records", 16 * (recordOverhead + 8), true},
		{"a run per record", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSorter(t.TempDir(), tt.limit)
			defer s.close()
			for i, k := range want {
				require.NoError(t, s.add([]byte(k), fmt.Appendf(nil, "%05d", i)))
			}
			it, err := s.iterator()
			require.NoError(t, err)
			var got []string
			prev := record{}
			for r, ok := it.next(); ok; r, ok = it.next() {
				assert.LessOrEqual(t, compareRecords(prev, r), 0)
				prev = r
				got = append(got, string(r.key))
			}
			require.NoError(t, it.err)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			assert.Equal(t, sorted, got)
			assert.Equal(t, tt.wantRuns, s.spilled() > 0)
		})
	}
}

func TestReadLedger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    Ledger
		want    []string
		wantErr string
	}{
		{"lines", Ledger{R: strings.NewReader("b\n\n a \nb\n")}, []string{"a", "b", "b"}, ""},
		{"csv column", Ledger{R: strings.NewReader("id,key\n1,b\n2,\"a\"\n"), Column: "key"}, []string{"a", "b"}, ""},
		{"lines after a byte order mark", Ledger{R: strings.NewReader("\ufeffK-1\nK-2\n")}, []string{"K-1", "K-2"}, ""},
		{"csv after a byte order mark", Ledger{R: strings.NewReader("\ufeffkey,id\nK-1,1\n"), Column: "key"}, []string{"K-1"}, ""},
		{"csv without the column", Ledger{Name: "x.csv", R: strings.NewReader("id,idem\n1,b\n"), Column: "key"}, nil,
			`invalid: engine ledger x.csv: no column "key" in its header row (id,idem); set --engine-ledger-column to one of them`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSorter(t.TempDir(), 0)
			defer s.close()
			err := readLedger(tt.give, s)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			it, err := s.iterator()
			require.NoError(t, err)
			var got []string
			for r, ok := it.next(); ok; r, ok = it.next() {
				got = append(got, string(r.key))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
