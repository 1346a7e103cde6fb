package dlqops_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlqops"
)

func TestParseTimeFlag(t *testing.T) {
	tests := []struct {
		give    string
		want    time.Time
		wantErr bool
	}{
		{give: "", want: time.Time{}},
		{give: "2026-11-29T07:00:00Z", want: base.Add(-24 * time.Hour)},
		{give: "2026-11-30T08:00:00+01:00", want: base},
		{give: "2026-11-30T06:59:59.5Z", want: base.Add(-500 * time.Millisecond)},
		{give: "24h", want: base.Add(-24 * time.Hour)},
		{give: " 90m ", want: base.Add(-90 * time.Minute)},
		{give: "7d", want: base.Add(-7 * 24 * time.Hour)},
		{give: "1d12h", want: base.Add(-36 * time.Hour)},
		{give: "0s", want: base},
		{give: "-1h", wantErr: true},
		{give: "+1h", wantErr: true},
		{give: "1.5d", wantErr: true},
		{give: "d", wantErr: true},
		{give: "1dd", wantErr: true},
		{give: "yesterday", wantErr: true},
		{give: "2026-11-30", wantErr: true},
		{give: "2026-11-30T07:00:00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := dlqops.ParseTimeFlag(tt.give, base)
			if tt.wantErr {
				require.ErrorIs(t, err, dlqops.ErrInvalid)
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", tt.give))
				return
			}
			require.NoError(t, err)
			assert.True(t, tt.want.Equal(got), "got %v, want %v", got, tt.want)
		})
	}
}

func ExampleParseTimeFlag() {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	for _, s := range []string{"24h", "7d", "2026-11-30T06:00:00+01:00"} {
		t, _ := dlqops.ParseTimeFlag(s, now)
		fmt.Println(t.UTC().Format(time.RFC3339))
	}
	_, err := dlqops.ParseTimeFlag("yesterday", now)
	fmt.Println(err)
	// Output:
	// 2026-11-29T07:00:00Z
	// 2026-11-23T07:00:00Z
	// 2026-11-30T05:00:00Z
	// invalid time "yesterday": want RFC 3339 (2026-11-30T07:00:00Z) or a duration ago (90m, 24h, 7d)
}
