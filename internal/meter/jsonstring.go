package meter

import (
	"unicode/utf16"
	"unicode/utf8"
)

// scanString scans the string at d.pos and returns its raw content and
// whether it holds escapes.
func (d *decoder) scanString() (raw []byte, escaped bool, fe *FieldError) {
	d.pos++ // the opening quote
	start := d.pos
	for d.pos < len(d.data) {
		// The run of plain bytes first, on locals: most strings are all of it.
		i, data := d.pos, d.data
		for i < len(data) && plain[data[i]] {
			i++
		}
		d.pos = i
		if i == len(data) {
			break
		}
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return d.data[start : d.pos-1], escaped, nil
		case c == '\\':
			escaped = true
			if fe := d.skipEscape(); fe != nil {
				return nil, false, fe
			}
		default: // a control character, the only other byte the plain run stops at
			return nil, false, d.syntaxError("control character in string")
		}
	}
	return nil, false, d.unexpected()
}

// plain marks the bytes a string holds as they are: all but the quote, the
// backslash and the control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

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
		} else if isHex(d.data[d.pos+2:]) {
			d.pos = len(d.data) // cut short within the escape
			return d.unexpected()
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

// isHex reports whether every byte of b is a hex digit.
func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
