package meter

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// ErrInvalid matches, with errors.Is, every error Decode returns for a
// rejected read.
var ErrInvalid = errors.New("invalid meter read")

// ErrInvalidDecimal matches, with errors.Is, every error ParseDecimal and
// Decimal.UnmarshalJSON return.
var ErrInvalidDecimal = errors.New("invalid decimal")

// FieldError says which field of a read is wrong and why.
type FieldError struct {
	// Field is the JSON field name, or "body" for a problem with the body as
	// a whole (size, encoding, syntax, duplicate names, not an object).
	Field  string
	Reason string
}

// Error returns "invalid meter read: <field>: <reason>".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return ErrInvalid.Error() + ": " + e.Reason
	}
	return ErrInvalid.Error() + ": " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func bodyError(reason string) *FieldError {
	return &FieldError{Field: "body", Reason: reason}
}

// quote renders a rejected value for an error message, cut short if long.
func quote(b []byte) string {
	const limit = 40
	if len(b) <= limit {
		return strconv.Quote(string(b))
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strconv.Quote(string(b[:cut])) + "..."
}
