package meter

import (
	"fmt"
	"unicode/utf8"
)

const (
	// maxDepth bounds the nesting of objects and arrays, as encoding/json does.
	maxDepth = 10000
	// linearKeys is how many names an object may have before duplicates are
	// looked up in a map rather than by a linear scan.
	linearKeys = 16
)

// decoder is a JSON scanner over one body. It validates as it goes and
// copies nothing it does not have to.
type decoder struct {
	data  []byte
	pos   int
	depth int
	// keys holds the names of the objects being scanned, innermost last, so
	// that duplicates are found by a linear scan without allocating. An object
	// with more than linearKeys names, or opened once keys is full, uses a map.
	keys  [2 * linearKeys][]byte
	nkeys int
}

func (d *decoder) syntaxError(what string) *FieldError {
	return bodyError(fmt.Sprintf("invalid JSON: %s at offset %d", what, d.pos))
}

func (d *decoder) unexpected() *FieldError {
	if d.pos >= len(d.data) {
		return d.syntaxError("unexpected end of input")
	}
	r, _ := utf8.DecodeRune(d.data[d.pos:])
	return d.syntaxError(fmt.Sprintf("unexpected %q", r))
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// skipValue scans one value of any kind.
func (d *decoder) skipValue() *FieldError {
	switch c := d.peek(); {
	case c == '"':
		_, _, fe := d.scanString()
		return fe
	case c == '{':
		return d.skipObject()
	case c == '[':
		return d.skipArray()
	case c == '-' || isDigit(c):
		return d.skipNumber()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	return d.unexpected()
}

// literal scans word (true, false or null); where the body breaks off or
// differs, that is where the syntax broke.
func (d *decoder) literal(word string) *FieldError {
	for i := range len(word) {
		if d.pos >= len(d.data) || d.data[d.pos] != word[i] {
			return d.unexpected()
		}
		d.pos++
	}
	return nil
}

// numberSpan returns the run of bytes that may belong to a number.
func (d *decoder) numberSpan() []byte {
	start := d.pos
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case isDigit(c), c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.pos++
		default:
			return d.data[start:d.pos]
		}
	}
	return d.data[start:d.pos]
}

func (d *decoder) skipNumber() *FieldError {
	start := d.pos
	span := d.numberSpan()
	if fe := d.numberEnd(); fe != nil {
		return fe
	}
	if _, ok := splitNumber(span); !ok {
		d.pos = start
		return d.syntaxError("invalid number")
	}
	return nil
}

// numberEnd checks what follows a number's bytes: a number is always inside
// the read's object, so the end of the body there is a body cut short, and
// anything but white space, a comma or a closing bracket is not JSON (a
// bare -Infinity breaks at its I).
func (d *decoder) numberEnd() *FieldError {
	switch d.peek() {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return nil
	}
	return d.unexpected()
}

// kindOf names the kind of JSON value that starts with c, or "" if none does.
func kindOf(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't', c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-', isDigit(c):
		return "number"
	}
	return ""
}
