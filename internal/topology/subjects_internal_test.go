package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"meter.reads.>", "meter.reads.>", true},
		{"meter.reads.>", "meter.reads.north", true},
		{"meter.reads.>", "meter.reads.north.east", true},
		{"meter.reads.>", "meter.reads", false},
		{"meter.>", "meter.reads.>", true},
		{">", "meter.reads.*", true},
		{"meter.reads.*", "meter.reads.north", true},
		{"meter.reads.*", "meter.reads.*", true},
		{"meter.reads.*", "meter.reads.>", false},
		{"meter.reads.*", "meter.reads.north.east", false},
		{"meter.reads.north", "meter.reads.*", false},
		{"meter.reads.north", "meter.reads.north", true},
		{"meter.reads.north", "meter.reads.south", false},
		{"meter.*.north", "meter.reads.north", true},
		{"meter.dlq.>", "meter.reads.>", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, covers(tt.filter, tt.subject), "%s covers %s", tt.filter, tt.subject)
	}
	assert.Equal(t, []string{"meter.events.>"}, uncovered([]string{"meter.reads.>", "meter.events.>"}, []string{"meter.reads.>"}))
	assert.Empty(t, uncovered([]string{"meter.reads.north", "meter.reads.south"}, []string{"meter.reads.*"}))
}
