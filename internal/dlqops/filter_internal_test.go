package dlqops

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubjectMatch(t *testing.T) {
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{"meter.reads.north", "meter.reads.north", true},
		{"meter.reads.north", "meter.reads.south", false},
		{"meter.reads.north", "meter.reads.north.x", false},
		{"meter.reads.*", "meter.reads.north", true},
		{"meter.reads.*", "meter.reads", false},
		{"meter.reads.*", "meter.reads.north.x", false},
		{"meter.*.north", "meter.reads.north", true},
		{"meter.reads.>", "meter.reads.north.x", true},
		{"meter.reads.>", "meter.reads", false},
		{">", "meter", true},
		{"*", "meter.reads", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.subject, func(t *testing.T) {
			assert.True(t, validPattern(tt.pattern))
			assert.Equal(t, tt.want, subjectMatch(tt.pattern, tt.subject))
		})
	}
}
