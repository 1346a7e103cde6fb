package meter

import (
	"fmt"
	"strings"
)

// Limits on a Decimal.
const (
	// MaxPrecision is the most significant digits a Decimal may have.
	MaxPrecision = 38
	// MaxScale is the most digits a Decimal may have after the point.
	MaxScale = 38
	// MaxExponent bounds the exponent of a decimal written in exponent form.
	MaxExponent = 100
)

// Decimal is an exact decimal number of at most MaxPrecision significant
// digits and at most MaxScale digits after the point. It keeps the scale it
// was written with: 12.500 and 12.5 are equal (see Cmp) but print
// differently. The zero value is 0.
type Decimal struct {
	s     string // plain notation: no exponent, no leading zeros, no "-0"; "" is "0"
	scale int32
	sign  int8
}

// ParseDecimal parses s, written in the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? with no surrounding space.
// An exponent form is normalised to plain notation: 1.5e3 becomes 1500 and
// 1.50e-2 becomes 0.0150. Negative zero becomes zero with the same scale.
func ParseDecimal(s string) (Decimal, error) {
	var buf [decimalBufSize]byte
	out, scale, sign, reason := appendDecimal(buf[:0], []byte(s))
	if reason != "" {
		return Decimal{}, fmt.Errorf("%w: %s %s", ErrInvalidDecimal, quote([]byte(s)), reason)
	}
	return Decimal{s: string(out), scale: int32(scale), sign: int8(sign)}, nil
}

// String returns d in plain notation with its exact scale, such as "-12.500".
func (d Decimal) String() string {
	if d.s == "" {
		return "0"
	}
	return d.s
}

// Scale returns the number of digits after the point.
func (d Decimal) Scale() int { return int(d.scale) }

// Sign returns -1, 0 or +1.
func (d Decimal) Sign() int { return int(d.sign) }

// IsZero reports whether d is zero, whatever its scale.
func (d Decimal) IsZero() bool { return d.sign == 0 }

// Cmp compares d and e numerically and returns -1, 0 or +1. Scale does not
// matter: 12.5 and 12.500 compare equal.
func (d Decimal) Cmp(e Decimal) int {
	switch {
	case d.sign < e.sign:
		return -1
	case d.sign > e.sign:
		return 1
	case d.sign == 0:
		return 0
	}
	c := cmpAbs(strings.TrimPrefix(d.s, "-"), strings.TrimPrefix(e.s, "-"))
	return c * int(d.sign)
}

// Equal reports whether d and e are numerically equal. Use == to also
// compare the scale.
func (d Decimal) Equal(e Decimal) bool { return d.Cmp(e) == 0 }

// MarshalJSON encodes d as a JSON string, such as "12.500", so that no
// reader turns it into a float.
func (d Decimal) MarshalJSON() ([]byte, error) {
	s := d.String()
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string or number as ParseDecimal does. JSON
// null leaves d unchanged.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	text := b
	if len(b) > 0 && b[0] == '"' {
		dec := decoder{data: b}
		s, fe := dec.readString()
		if fe != nil || dec.pos != len(b) {
			return fmt.Errorf("%w: %s is not a JSON string", ErrInvalidDecimal, quote(b))
		}
		text = s
	}
	var buf [decimalBufSize]byte
	out, scale, sign, reason := appendDecimal(buf[:0], text)
	if reason != "" {
		return fmt.Errorf("%w: %s %s", ErrInvalidDecimal, quote(text), reason)
	}
	*d = Decimal{s: string(out), scale: int32(scale), sign: int8(sign)}
	return nil
}

// cmpAbs compares two unsigned plain-notation decimals.
func cmpAbs(a, b string) int {
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	if len(ai) != len(bi) { // integer parts have no leading zeros
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(ai, bi); c != 0 {
		return c
	}
	for i := 0; i < max(len(af), len(bf)); i++ {
		x, y := digitAt(af, i), digitAt(bf, i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func digitAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return '0'
}
