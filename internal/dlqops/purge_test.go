package dlqops_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlqops"
)

func TestPurge(t *testing.T) {
	tests := []struct {
		name      string
		f         dlqops.Filter
		confirm   bool
		wantAsked int // n passed to confirm; 0: not asked
		want      int
		left      []uint64
		out       string
	}{
		{"selection", dlqops.Filter{Cause: "http_422"}, true, 2, 2, []uint64{2, 3, 4}, "deleted 2 dead-lettered reads from METER_READS_DLQ\n"},
		{"meter and limit", dlqops.Filter{Meter: "MTR-1", Limit: 1}, true, 1, 1, []uint64{2, 3, 4, 5}, "deleted 1 dead-lettered reads from METER_READS_DLQ\n"},
		{"everything", dlqops.Filter{}, true, 5, 5, nil, "deleted 5 dead-lettered reads from METER_READS_DLQ\n"},
		{"not confirmed", dlqops.Filter{Cause: "http_422"}, false, 2, 0, []uint64{1, 2, 3, 4, 5}, "purge cancelled, nothing deleted\n"},
		{"nothing selected", dlqops.Filter{Cause: "nope"}, true, 0, 0, []uint64{1, 2, 3, 4, 5}, "no dead-lettered reads in METER_READS_DLQ match\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, reads()...)
			asked := 0
			n, err := e.ops.Purge(t.Context(), tt.f, "", func(n int) bool { asked = n; return tt.confirm })
			require.NoError(t, err)
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.wantAsked, asked)
			assert.Equal(t, tt.left, e.copies())
			assert.Equal(t, tt.out, e.out.String())
		})
	}
}

func TestPurgeNeedsConfirm(t *testing.T) {
	e := newEnv(t, reads()...)
	_, err := e.ops.Purge(t.Context(), dlqops.Filter{}, "", nil)
	require.ErrorIs(t, err, dlqops.ErrInvalid)
	assert.Len(t, e.copies(), 5)
}

func TestPurgeLeavesCopiesStoredAfterTheSelection(t *testing.T) {
	e := newEnv(t, reads()[:2]...)
	n, err := e.ops.Purge(t.Context(), dlqops.Filter{}, "", func(int) bool {
		// A read is dead-lettered while the operator reads the prompt.
		require.NoError(t, deadLetter(t.Context(), e.js, reads()[2]))
		return true
	})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []uint64{3}, e.copies())
}
