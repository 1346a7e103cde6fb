package meter_test

import (
	"errors"
	"fmt"

	"github.com/meterline/meter-consumer/internal/meter"
)

func ExampleDecode() {
	body := []byte(`{
		"meter_id": "MTR-1",
		"read_at": "2026-11-30T12:30:00.500+05:30",
		"quantity": 1.50e3,
		"unit": "kWh",
		"firmware": {"version": "4.2"}
	}`)
	r, err := meter.Decode(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := r.MarshalJSON()
	fmt.Println(string(out))
	// Output:
	// {"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00.5Z","quantity":"1500","unit":"kWh","idempotency_key":"MTR-1@2026-11-30T07:00:00.5Z"}
}

func ExampleDecode_invalid() {
	_, err := meter.Decode([]byte(`{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1e999","unit":"kWh"}`))
	fmt.Println(err)

	var fe *meter.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field, errors.Is(err, meter.ErrInvalid))
	}
	// Output:
	// invalid_payload: invalid meter read: quantity: "1e999" exponent out of range
	// quantity true
}

func ExampleParseDecimal() {
	for _, s := range []string{"12.500", "1.50e-2", "-0.00"} {
		d, err := meter.ParseDecimal(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(d, d.Scale())
	}
	// Output:
	// 12.500 3
	// 0.0150 4
	// 0.00 2
}
