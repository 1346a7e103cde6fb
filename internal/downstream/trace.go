package downstream

import (
	"context"
	"strings"
)

type traceParentKey struct{}

// WithTraceParent returns a copy of ctx carrying value, the W3C traceparent
// of the read being delivered (e.g. the traceparent header of its NATS
// message); Deliver sends it as the traceparent header, so a trace started
// at the head-end reaches the rate engine. The sink records no span of its
// own: the value is passed on unchanged. A value that is not a valid
// traceparent (https://www.w3.org/TR/trace-context/#traceparent-header) is
// dropped, not an error: a head-end's bad header must not fail a read.
func WithTraceParent(ctx context.Context, value string) context.Context {
	value = strings.TrimSpace(value)
	if !validTraceParent(value) {
		return ctx
	}
	return context.WithValue(ctx, traceParentKey{}, value)
}

// traceParent returns the value WithTraceParent stored, or "".
func traceParent(ctx context.Context) string {
	v, _ := ctx.Value(traceParentKey{}).(string)
	return v
}

// maxTraceParent bounds a traceparent of a later version, whose extra
// fields are unknown.
const maxTraceParent = 256

// validTraceParent reports whether s is version-traceid-parentid-flags: 2,
// 32, 16 and 2 lowercase hex digits; version ff, an all-zero trace id and
// an all-zero parent id are invalid; version 00 has nothing after the
// flags, a later version may have more fields after a dash, taken only if
// they are lowercase hex and dashes, so that nothing a header cannot carry
// reaches the request.
func validTraceParent(s string) bool {
	const n = 55 // 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(s) < n || len(s) > maxTraceParent || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	switch {
	case !lowerHex(version) || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags):
		return false
	case version == "ff", allZero(traceID), allZero(parentID):
		return false
	case version == "00":
		return len(s) == n
	default:
		return len(s) == n || s[n] == '-' && lowerHex(strings.ReplaceAll(s[n:], "-", ""))
	}
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }
