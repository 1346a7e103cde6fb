package meter

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/meterline/meter-consumer/internal/classify"
)

// MaxSize is the largest body Decode accepts, in bytes.
const MaxSize = 64 << 10

// Limits on the string fields of a read.
const (
	maxMeterIDLen = 64
	maxKeyLen     = 128
)

// Read is one validated, normalised meter read.
type Read struct {
	MeterID        string
	ReadAt         time.Time // in UTC
	Quantity       Decimal
	Unit           Unit
	IdempotencyKey string // given or derived; never empty after Decode
}

// Decode validates body against the meter-read contract and returns the read
// it holds. Every error is a permanent *classify.Error wrapping a *FieldError.
func Decode(body []byte) (Read, error) {
	if len(body) > MaxSize {
		return Read{}, classify.NewPermanent(classify.CausePayloadTooLarge,
			bodyError(fmt.Sprintf("%d bytes is over the %d-byte limit", len(body), MaxSize)))
	}
	if !utf8.Valid(body) {
		return Read{}, classify.NewPermanent(classify.CauseInvalidPayload, bodyError("invalid UTF-8"))
	}
	d := decoder{data: body}
	r, fe := d.read()
	if fe != nil {
		return Read{}, classify.NewPermanent(classify.CauseInvalidPayload, fe)
	}
	return r, nil
}

// read scans the whole body: one object, then nothing but white space.
func (d *decoder) read() (Read, *FieldError) {
	d.skipSpace()
	switch c := d.peek(); {
	case d.pos == len(d.data):
		return Read{}, bodyError("is empty")
	case c != '{' && kindOf(c) != "":
		return Read{}, bodyError("is a JSON " + kindOf(c) + ", want an object")
	case c != '{':
		return Read{}, d.unexpected()
	}

	var f fields
	ks, empty, fe := d.objectStart()
	for more := !empty; fe == nil && more; {
		var key []byte
		if key, fe = d.objectKey(&ks); fe != nil {
			break
		}
		if fe = d.member(&f, key); fe != nil {
			break
		}
		more, fe = d.objectNext(ks)
	}
	if fe != nil {
		return Read{}, fe
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return Read{}, d.syntaxError("trailing data after the object")
	}
	return f.build()
}

// build checks that the required fields are present and assembles the read.
func (f *fields) build() (Read, *FieldError) {
	for _, req := range [...]struct {
		bit  uint8
		name string
	}{{hasMeterID, "meter_id"}, {hasReadAt, "read_at"}, {hasQuantity, "quantity"}, {hasUnit, "unit"}} {
		if f.has&req.bit == 0 {
			return Read{}, &FieldError{Field: req.name, Reason: "is required"}
		}
	}

	// All the strings of a read share one allocation:
	// meter_id, then the key (or "@" and read_at, which with meter_id form
	// the derived key), then the quantity.
	var buf [maxMeterIDLen + maxKeyLen + decimalBufSize]byte
	b := append(buf[:0], f.meterID...)
	keyStart := 0
	if f.has&hasKey != 0 {
		keyStart = len(b)
		b = append(b, f.key...)
	} else {
		b = append(b, '@')
		b = f.readAt.AppendFormat(b, time.RFC3339Nano)
	}
	keyEnd := len(b)
	b = append(b, f.quantity[:f.qtyLen]...)
	s := string(b)

	return Read{
		MeterID:        s[:len(f.meterID)],
		ReadAt:         f.readAt,
		Quantity:       Decimal{s: s[keyEnd:], scale: int32(f.scale), sign: int8(f.sign)},
		Unit:           f.unit,
		IdempotencyKey: s[keyStart:keyEnd],
	}, nil
}
