package meter

import (
	"time"
	"unicode/utf8"
)

// MarshalJSON returns the normalised form of r; see AppendJSON.
func (r Read) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 192)), nil
}

// AppendJSON appends the normalised form of r to dst and returns the result:
//
//	{"meter_id":"…","read_at":"<UTC, RFC 3339 nano>","quantity":"<exact decimal>","unit":"…","idempotency_key":"…"}
//
// An empty IdempotencyKey is written as the derived key. Decode accepts the
// form and returns an equal Read for every read it returned itself.
func (r Read) AppendJSON(dst []byte) []byte {
	at := r.ReadAt.UTC()
	dst = append(dst, `{"meter_id":`...)
	dst = appendString(dst, r.MeterID)
	dst = append(dst, `,"read_at":"`...)
	dst = at.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","quantity":"`...)
	dst = append(dst, r.Quantity.String()...)
	dst = append(dst, `","unit":`...)
	dst = appendString(dst, string(r.Unit))
	dst = append(dst, `,"idempotency_key":`...)
	if r.IdempotencyKey == "" {
		dst = append(dst, '"')
		dst = appendStringBody(dst, r.MeterID)
		dst = append(dst, '@')
		dst = at.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	} else {
		dst = appendString(dst, r.IdempotencyKey)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// appendStringBody appends s escaped for use inside a JSON string. Invalid
// UTF-8 becomes U+FFFD.
func appendStringBody(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				dst = append(dst, `\ufffd`...)
			}
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}
