package meter

import (
	"bytes"
	"fmt"
	"unicode/utf16"
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

// keySet is the set of names of one object: d.keys[start:d.nkeys], or seen
// once it has outgrown them.
type keySet struct {
	start int
	seen  map[string]struct{}
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

func (d *decoder) literal(word string) *FieldError {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(word)) {
		return d.unexpected()
	}
	d.pos += len(word)
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
	if _, ok := splitNumber(d.numberSpan()); !ok {
		d.pos = start
		return d.syntaxError("invalid number")
	}
	return nil
}

// scanString scans the string at d.pos and returns its raw content and
// whether it holds escapes.
func (d *decoder) scanString() (raw []byte, escaped bool, fe *FieldError) {
	d.pos++ // the opening quote
	start := d.pos
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return d.data[start : d.pos-1], escaped, nil
		case c == '\\':
			escaped = true
			if fe := d.skipEscape(); fe != nil {
				return nil, false, fe
			}
		case c < 0x20:
			return nil, false, d.syntaxError("control character in string")
		default:
			d.pos++
		}
	}
	return nil, false, d.unexpected()
}

func (d *decoder) skipEscape() *FieldError {
	if d.pos+1 >= len(d.data) {
		d.pos = len(d.data)
		return d.unexpected()
	}
	switch d.data[d.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.pos += 2
		return nil
	case 'u':
		if d.pos+6 <= len(d.data) {
			if _, ok := hex4(d.data[d.pos+2 : d.pos+6]); ok {
				d.pos += 6
				return nil
			}
		}
	}
	return d.syntaxError("invalid escape in string")
}

// readString scans the string at d.pos and returns its content. The result
// aliases the body unless the string holds escapes.
func (d *decoder) readString() ([]byte, *FieldError) {
	raw, escaped, fe := d.scanString()
	if fe != nil || !escaped {
		return raw, fe
	}
	return unescape(raw), nil
}

// unescape decodes the escapes of a string already checked by scanString. A
// lone surrogate becomes U+FFFD, as in encoding/json.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(raw[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, _ = hex4(raw[i+2 : i+6])
				}
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case isDigit(c):
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// objectStart consumes the '{' at d.pos, and the '}' too if the object is
// empty.
func (d *decoder) objectStart() (ks keySet, empty bool, fe *FieldError) {
	if d.depth++; d.depth > maxDepth {
		return ks, false, d.syntaxError("nesting too deep")
	}
	d.pos++
	ks.start = d.nkeys
	d.skipSpace()
	if d.peek() == '}' {
		d.pos++
		d.depth--
		return ks, true, nil
	}
	return ks, false, nil
}

// objectKey reads a member's name and the ':' after it, and rejects a name
// the object already has.
func (d *decoder) objectKey(ks *keySet) ([]byte, *FieldError) {
	d.skipSpace()
	if d.peek() != '"' {
		return nil, d.unexpected()
	}
	key, fe := d.readString()
	if fe != nil {
		return nil, fe
	}
	if fe := d.addKey(ks, key); fe != nil {
		return nil, fe
	}
	d.skipSpace()
	if d.peek() != ':' {
		return nil, d.unexpected()
	}
	d.pos++
	d.skipSpace()
	return key, nil
}

func (d *decoder) addKey(ks *keySet, key []byte) *FieldError {
	if ks.seen == nil {
		for _, k := range d.keys[ks.start:d.nkeys] {
			if bytes.Equal(k, key) {
				return bodyError("duplicate key " + quote(key))
			}
		}
		if d.nkeys < len(d.keys) && d.nkeys-ks.start < linearKeys {
			d.keys[d.nkeys] = key
			d.nkeys++
			return nil
		}
		ks.seen = make(map[string]struct{}, 4*linearKeys)
		for _, k := range d.keys[ks.start:d.nkeys] {
			ks.seen[string(k)] = struct{}{}
		}
	}
	if _, dup := ks.seen[string(key)]; dup {
		return bodyError("duplicate key " + quote(key))
	}
	ks.seen[string(key)] = struct{}{}
	return nil
}

// objectNext consumes the ',' (more is true) or the '}' after a member.
func (d *decoder) objectNext(ks keySet) (more bool, fe *FieldError) {
	d.skipSpace()
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		d.depth--
		d.nkeys = ks.start
		return false, nil
	}
	return false, d.unexpected()
}

func (d *decoder) skipObject() *FieldError {
	ks, empty, fe := d.objectStart()
	for more := !empty; fe == nil && more; {
		if _, fe = d.objectKey(&ks); fe != nil {
			break
		}
		if fe = d.skipValue(); fe != nil {
			break
		}
		more, fe = d.objectNext(ks)
	}
	return fe
}

func (d *decoder) skipArray() *FieldError {
	if d.depth++; d.depth > maxDepth {
		return d.syntaxError("nesting too deep")
	}
	d.pos++
	d.skipSpace()
	if d.peek() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		d.skipSpace()
		if fe := d.skipValue(); fe != nil {
			return fe
		}
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.unexpected()
		}
	}
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
