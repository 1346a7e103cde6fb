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

// fields collects the members of a read as they are scanned.
type fields struct {
	meterID  []byte
	readAt   time.Time
	quantity [decimalBufSize]byte
	qtyLen   int
	scale    int
	sign     int
	unit     Unit
	key      []byte
	has      uint8
}

// Bits of fields.has.
const (
	hasMeterID = 1 << iota
	hasReadAt
	hasQuantity
	hasUnit
	hasKey
)

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

// member scans the value of the member named key into f.
func (d *decoder) member(f *fields, key []byte) *FieldError {
	var fe *FieldError
	switch string(key) {
	case "meter_id":
		f.meterID, fe = d.meterID()
		f.has |= hasMeterID
	case "read_at":
		f.readAt, fe = d.readAt()
		f.has |= hasReadAt
	case "quantity":
		fe = d.quantity(f)
		f.has |= hasQuantity
	case "unit":
		f.unit, fe = d.unit()
		f.has |= hasUnit
	case "idempotency_key":
		if d.peek() == 'n' {
			return d.literal("null") // absent: the key is derived
		}
		f.key, fe = d.idempotencyKey()
		f.has |= hasKey
	default:
		fe = d.skipValue()
	}
	return fe
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

// stringValue reads the value of field, which must be a string.
func (d *decoder) stringValue(field string) ([]byte, *FieldError) {
	if d.peek() == '"' {
		return d.readString()
	}
	return nil, d.wrongType(field, "a string")
}

// wrongType reports a value of the wrong kind, once it is known to be valid
// JSON.
func (d *decoder) wrongType(field, want string) *FieldError {
	start := d.pos
	if fe := d.skipValue(); fe != nil {
		return fe
	}
	return &FieldError{Field: field, Reason: "must be " + want + ", got " + kindOf(d.data[start])}
}

func (d *decoder) meterID() ([]byte, *FieldError) {
	b, fe := d.stringValue("meter_id")
	if fe != nil {
		return nil, fe
	}
	if len(b) == 0 || len(b) > maxMeterIDLen {
		return nil, &FieldError{Field: "meter_id", Reason: fmt.Sprintf("%s must be 1 to %d characters", quote(b), maxMeterIDLen)}
	}
	for _, c := range b {
		if !meterIDChar(c) {
			return nil, &FieldError{Field: "meter_id", Reason: fmt.Sprintf("%s may hold only A-Z a-z 0-9 . _ : -", quote(b))}
		}
	}
	return b, nil
}

func meterIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

func (d *decoder) readAt() (time.Time, *FieldError) {
	b, fe := d.stringValue("read_at")
	if fe != nil {
		return time.Time{}, fe
	}
	t, reason := parseTimestamp(b)
	if reason != "" {
		return time.Time{}, &FieldError{Field: "read_at", Reason: quote(b) + " " + reason}
	}
	return t, nil
}

func (d *decoder) quantity(f *fields) *FieldError {
	var text []byte
	switch c := d.peek(); {
	case c == '"':
		var fe *FieldError
		if text, fe = d.readString(); fe != nil {
			return fe
		}
	case c == '-' || isDigit(c):
		text = d.numberSpan()
	default:
		return d.wrongType("quantity", "a decimal string or number")
	}
	out, scale, sign, reason := appendDecimal(f.quantity[:0], text)
	if reason != "" {
		return &FieldError{Field: "quantity", Reason: quote(text) + " " + reason}
	}
	f.qtyLen, f.scale, f.sign = len(out), scale, sign
	return nil
}

func (d *decoder) unit() (Unit, *FieldError) {
	b, fe := d.stringValue("unit")
	if fe != nil {
		return "", fe
	}
	u, ok := parseUnit(b)
	if !ok {
		return "", &FieldError{Field: "unit", Reason: quote(b) + " is not one of Wh kWh MWh varh kvarh m3 L gal ft3 ccf therm"}
	}
	return u, nil
}

func (d *decoder) idempotencyKey() ([]byte, *FieldError) {
	b, fe := d.stringValue("idempotency_key")
	if fe != nil {
		return nil, fe
	}
	if len(b) == 0 || len(b) > maxKeyLen {
		return nil, &FieldError{Field: "idempotency_key", Reason: fmt.Sprintf("%s must be 1 to %d characters", quote(b), maxKeyLen)}
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return nil, &FieldError{Field: "idempotency_key", Reason: quote(b) + " may hold only printable ASCII"}
		}
	}
	if b[0] == ' ' || b[len(b)-1] == ' ' {
		return nil, &FieldError{Field: "idempotency_key", Reason: quote(b) + " may not start or end with a space"}
	}
	return b, nil
}
