package meter

import "time"

// Reasons a timestamp is rejected; each follows the quoted input.
const (
	reasonNotRFC3339 = "is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)"
	reasonNoOffset   = "has no UTC offset (want Z or ±hh:mm)"
	reasonFraction   = "has more than 9 fractional second digits"
	reasonDate       = "is not a valid date"
	reasonClock      = "is not a valid time of day"
	reasonLeap       = "is a leap second, which is not supported"
	reasonOffset     = "has an offset out of range"
	reasonYear       = "is outside years 0000-9999 in UTC"
)

// parseTimestamp parses an RFC 3339 date-time with an explicit offset and
// returns it in UTC:
//
//	YYYY-MM-DD ("T" / "t") hh:mm:ss [ "." 1*9DIGIT ] ("Z" / "z" / ("+" / "-") hh:mm)
func parseTimestamp(b []byte) (time.Time, string) {
	if len(b) < len("2006-01-02T15:04:05") ||
		b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return time.Time{}, reasonNotRFC3339
	}
	year, ok1 := atoi(b[0:4])
	month, ok2 := atoi(b[5:7])
	day, ok3 := atoi(b[8:10])
	hour, ok4 := atoi(b[11:13])
	minute, ok5 := atoi(b[14:16])
	sec, ok6 := atoi(b[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return time.Time{}, reasonNotRFC3339
	}

	i := 19
	nsec := 0
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		i = skipDigits(b, i)
		switch n := i - start; {
		case n == 0:
			return time.Time{}, reasonNotRFC3339
		case n > 9:
			return time.Time{}, reasonFraction
		default:
			nsec, _ = atoi(b[start:i])
			for ; n < 9; n++ {
				nsec *= 10
			}
		}
	}

	var offset int // seconds east of UTC
	switch {
	case i == len(b):
		return time.Time{}, reasonNoOffset
	case b[i] == 'Z' || b[i] == 'z':
		i++
	case b[i] == '+' || b[i] == '-':
		if len(b)-i != len("+05:30") || b[i+3] != ':' {
			return time.Time{}, reasonNotRFC3339
		}
		oh, ok1 := atoi(b[i+1 : i+3])
		om, ok2 := atoi(b[i+4 : i+6])
		if !ok1 || !ok2 {
			return time.Time{}, reasonNotRFC3339
		}
		if oh > 23 || om > 59 {
			return time.Time{}, reasonOffset
		}
		offset = oh*3600 + om*60
		if b[i] == '-' {
			offset = -offset
		}
		i += len("+05:30")
	default:
		return time.Time{}, reasonNotRFC3339
	}
	if i != len(b) {
		return time.Time{}, reasonNotRFC3339
	}

	switch {
	case month < 1 || month > 12 || day < 1 || day > daysIn(month, year):
		return time.Time{}, reasonDate
	case sec == 60:
		return time.Time{}, reasonLeap
	case hour > 23 || minute > 59 || sec > 59:
		return time.Time{}, reasonClock
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).
		Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, reasonYear
	}
	return t, ""
}

// atoi parses a short run of ASCII digits.
func atoi(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
