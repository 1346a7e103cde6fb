package demo

import (
	"fmt"
	"time"
)

// fault is one way of making a read invalid.
type fault struct {
	name string
	body func(w wireRead, now time.Time) []byte
}

// faults are cycled through, in order, for the invalid reads.
var faults = []fault{
	{"missing_zone", func(w wireRead, now time.Time) []byte {
		w.ReadAt = now.Format("2006-01-02T15:04:05.000")
		return marshal(w)
	}},
	{"exponent_out_of_range", func(w wireRead, _ time.Time) []byte {
		w.Quantity = "1e999"
		return marshal(w)
	}},
	{"bad_unit", func(w wireRead, _ time.Time) []byte {
		w.Unit = "kwh"
		return marshal(w)
	}},
	{"not_an_object", func(w wireRead, _ time.Time) []byte {
		return marshal([]string{w.MeterID, w.ReadAt, w.Quantity, w.Unit})
	}},
	{"bad_meter_id", func(w wireRead, _ time.Time) []byte {
		w.MeterID = fmt.Sprintf("MTR %s/é", w.MeterID[len("MTR-"):])
		return marshal(w)
	}},
	{"truncated", func(w wireRead, _ time.Time) []byte {
		b := marshal(w)
		return b[:len(b)/2]
	}},
	{"missing_quantity", func(w wireRead, _ time.Time) []byte {
		return marshal(map[string]string{
			"meter_id": w.MeterID, "read_at": w.ReadAt, "unit": w.Unit,
			"idempotency_key": w.IdempotencyKey,
		})
	}},
}
