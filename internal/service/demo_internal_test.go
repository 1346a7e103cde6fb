package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubjectPrefix(t *testing.T) {
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"meter.reads.>"}, "meter.reads"},
		{[]string{"north.reads.*", "south.reads.>"}, "north.reads"},
	}
	for _, tt := range tests {
		got, err := subjectPrefix(tt.give)
		require.NoError(t, err, "%v", tt.give)
		assert.Equal(t, tt.want, got, "%v", tt.give)
	}
	for _, give := range [][]string{nil, {">"}, {"*"}, {"*.*"}, {"meter.*.reads"}} {
		_, err := subjectPrefix(give)
		assert.Error(t, err, "%v", give)
	}
}
