package downstream

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidTraceParent(t *testing.T) {
	const (
		trace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent = "00f067aa0ba902b7"
	)
	tests := []struct {
		give string
		want bool
	}{
		{"00-" + trace + "-" + parent + "-01", true},
		{"00-" + trace + "-" + parent + "-00", true},
		{"01-" + trace + "-" + parent + "-01", true},
		{"01-" + trace + "-" + parent + "-01-abc-0", true},
		{"01-" + trace + "-" + parent + "-01-future", false}, // unknown fields: hex only
		{"01-" + trace + "-" + parent + "-01-\x00", false},
		{"01-" + trace + "-" + parent + "-01-" + strings.Repeat("a", 200), true},
		{"01-" + trace + "-" + parent + "-01-" + strings.Repeat("a", 202), false},
		{"00-" + trace + "-" + parent + "-01-future", false}, // version 00 ends at the flags
		{"01-" + trace + "-" + parent + "-01x", false},
		{"ff-" + trace + "-" + parent + "-01", false},
		{"00-" + strings.ToUpper(trace) + "-" + parent + "-01", false},
		{"00-" + strings.Repeat("0", 32) + "-" + parent + "-01", false},
		{"00-" + trace + "-" + strings.Repeat("0", 16) + "-01", false},
		{"00-" + trace + "-" + parent + "-0g", false},
		{"00-" + trace + "_" + parent + "-01", false},
		{"00-" + trace[:31] + "-" + parent + "-01", false},
		{"", false},
		{"garbage", false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, validTraceParent(tt.give))
		})
	}
}

func FuzzValidTraceParent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abc")
	f.Fuzz(func(t *testing.T, s string) {
		if validTraceParent(s) {
			// A valid value is safe to put in a header as it is.
			assert.NoError(t, CheckHeader("X-Check", s, false))
			assert.GreaterOrEqual(t, len(s), 55)
			assert.LessOrEqual(t, len(s), maxTraceParent)
		}
	})
}
