package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubjectPrefix(t *testing.T) {
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"meter.reads.>"}, "meter.reads"},
		{[]string{"north.reads.*", "south.reads.>"}, "north.reads"},
		{[]string{">"}, "meter.reads"},
		{nil, "meter.reads"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, subjectPrefix(tt.give), "%v", tt.give)
	}
}
