package meter

import (
	"fmt"
	"time"
)

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
	// The characters first: the length is counted in bytes, which are
	// characters only once they are known to be ASCII.
	for _, c := range b {
		if !meterIDChar(c) {
			return nil, &FieldError{Field: "meter_id", Reason: fmt.Sprintf("%s may hold only A-Z a-z 0-9 . _ : -", quote(b))}
		}
	}
	if len(b) == 0 || len(b) > maxMeterIDLen {
		return nil, &FieldError{Field: "meter_id", Reason: fmt.Sprintf("%s must be 1 to %d characters", quote(b), maxMeterIDLen)}
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
		if fe := d.numberEnd(); fe != nil {
			return fe
		}
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
	// The characters first, as for meter_id.
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return nil, &FieldError{Field: "idempotency_key", Reason: quote(b) + " may hold only printable ASCII"}
		}
	}
	if len(b) == 0 || len(b) > maxKeyLen {
		return nil, &FieldError{Field: "idempotency_key", Reason: fmt.Sprintf("%s must be 1 to %d characters", quote(b), maxKeyLen)}
	}
	if b[0] == ' ' || b[len(b)-1] == ' ' {
		return nil, &FieldError{Field: "idempotency_key", Reason: quote(b) + " may not start or end with a space"}
	}
	return b, nil
}
