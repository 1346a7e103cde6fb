package dlqops

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTimeFlag reads a --since or --until value: an RFC 3339 time, or a
// duration meaning that long before now ("90m", "24h", "7d", "1d12h"; d is
// 24 hours). "" is the zero time (no bound).
func ParseTimeFlag(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, ok := parseAgo(s)
	if !ok {
		return time.Time{}, fmt.Errorf("%w time %q: want RFC 3339 (2026-11-30T07:00:00Z) or a duration ago (90m, 24h, 7d)", ErrInvalid, s)
	}
	return now.Add(-d), nil
}

// parseAgo parses a non-negative Go duration with an optional leading
// whole number of days.
func parseAgo(s string) (time.Duration, bool) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, false
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, true
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || s[0] == '+' {
		return 0, false
	}
	return days + d, true
}
