package bench

import (
	"strconv"
	"strings"
)

// readAt is the read time of every benchmark read; meter ids make them
// unique.
const readAt = "2026-11-30T07:00:00Z"

// Body returns read i: about 200 bytes of valid JSON with a unique meter id
// (so a unique derived idempotency key) and a decimal quantity built as a
// string. The fields past unit are unknown to the contract and ignored.
func Body(i int) []byte {
	b := make([]byte, 0, 224)
	b = append(b, `{"meter_id":"`...)
	b = appendMeterID(b, i)
	b = append(b, `","read_at":"`+readAt+`","quantity":"`...)
	b = strconv.AppendInt(b, int64(1000+i%9000), 10)
	b = append(b, '.')
	frac := i % 1000
	if frac < 100 {
		b = append(b, '0')
	}
	if frac < 10 {
		b = append(b, '0')
	}
	b = strconv.AppendInt(b, int64(frac), 10)
	b = append(b, `","unit":"kWh","head_end":"north-substation-07","register":"import-active-energy-total","firmware":"4.2.1-r17"}`...)
	return b
}

// Key returns the idempotency key Decode derives for read i.
func Key(i int) string {
	return string(appendMeterID(nil, i)) + "@" + readAt
}

// Index returns i for the key of read i.
func Index(key string) (int, bool) {
	id, ok := strings.CutSuffix(key, "@"+readAt)
	if !ok {
		return 0, false
	}
	id, ok = strings.CutPrefix(id, "MTR-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(id)
	return i, err == nil && i >= 0
}

// appendMeterID appends MTR- and i, zero-padded to at least seven digits.
func appendMeterID(b []byte, i int) []byte {
	b = append(b, "MTR-"...)
	digits := strconv.Itoa(i)
	for range 7 - len(digits) {
		b = append(b, '0')
	}
	return append(b, digits...)
}
