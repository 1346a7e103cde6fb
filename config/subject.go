package config

import (
	"strings"
	"unicode"
)

// validName reports whether s can name a JetStream stream or consumer:
// non-empty, with no whitespace or control characters, and none of '.', '*',
// '>' or a path separator.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(`.*>/\`, r) {
			return false
		}
	}
	return true
}

// validSubject reports whether s is a NATS subject a stream can hold:
// dot-separated non-empty tokens without whitespace, where '>' may only be
// the last token. '*' and '>' are wildcards only as whole tokens.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		if !validToken(t) || (t == ">" && i != len(tokens)-1) {
			return false
		}
	}
	return true
}

// validPrefix reports whether s is a subject without wildcards, so that
// s + ".>" is a valid subject.
func validPrefix(s string) bool {
	if !validSubject(s) {
		return false
	}
	for t := range strings.SplitSeq(s, ".") {
		if t == "*" || t == ">" {
			return false
		}
	}
	return true
}

func validToken(t string) bool {
	if t == "" {
		return false
	}
	for _, r := range t {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// subjectsOverlap reports whether some subject matches both a and b, which
// are valid subjects that may hold wildcards: '*' matches one token, '>' one
// or more tokens at the end.
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == ">" || bt[i] == ">" {
			return true // the other has a token here, and more may follow
		}
		if at[i] != bt[i] && at[i] != "*" && bt[i] != "*" {
			return false
		}
	}
	return len(at) == len(bt)
}

// validBucket reports a valid key-value bucket name.
func validBucket(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
