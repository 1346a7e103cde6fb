package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubjectsOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"meter.reads.>", "meter.dlq.>", false},
		{"meter.>", "meter.dlq.>", true},
		{"*.reads.>", "meter.dlq.>", false},
		{"*.dlq.>", "meter.dlq.>", true},
		{"*.*.x", "meter.dlq.>", true},
		{"meter.*", "meter.dlq.>", false}, // meter.dlq alone is not a dead-letter subject
		{"meter.*.*", "meter.dlq.>", true},
		{"meter.dlq", "meter.dlq.>", false},
		{"meter.dlq.a.b.c", "meter.dlq.>", true},
		{">", "meter.dlq.>", true},
		{"meter", "meter.dlq.>", false},
		{"meter.reads", "meter.reads", true},
		{"meter.reads", "meter.reads.x", false},
		{"meter.*", "meter.reads", true},
		{"meter.*", "*.reads", true},
		{"a.*.c", "a.b.d", false},
		{"other.>", "meter.dlq.>", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			assert.Equal(t, tt.want, subjectsOverlap(tt.a, tt.b))
			assert.Equal(t, tt.want, subjectsOverlap(tt.b, tt.a), "symmetric")
		})
	}
}

func TestValidSubject(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"meter.reads.>", true},
		{"meter.*.x", true},
		{">", true},
		{"*", true},
		{"meter", true},
		{"meter.re*ds", true}, // a wildcard only as a whole token; this is a literal
		{"", false},
		{"meter..reads", false},
		{".meter", false},
		{"meter.", false},
		{"meter.>.x", false},
		{"meter reads", false},
		{"meter.\treads", false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, validSubject(tt.give))
		})
	}
}

func TestValidPrefix(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"meter.dlq", true},
		{"dlq", true},
		{"", false},
		{"meter.*", false},
		{"meter.>", false},
		{"meter..dlq", false},
		{"meter.dlq.", false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, validPrefix(tt.give))
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"METER_READS", true},
		{"meter-consumer", true},
		{"", false},
		{"METER READS", false},
		{"METER.READS", false},
		{"METER*", false},
		{"METER>", false},
		{"METER/READS", false},
		{`METER\READS`, false},
		{"METER\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, validName(tt.give))
		})
	}
}
