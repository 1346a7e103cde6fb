package config

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// redacted replaces a secret that is set.
const redacted = "REDACTED"

// Redacted returns a copy of c with nats.password, nats.token and any
// password or token inside nats.url or downstream.url replaced by "REDACTED"
// when set, and so the value of every downstream header whose name looks
// like a credential (see sensitiveHeader).
// The copy shares no slices or maps with c.
func (c Config) Redacted() Config {
	c.NATS = c.NATS.Redacted()
	c.Downstream.URL = redactURL(c.Downstream.URL)
	c.Stream.Subjects = slices.Clone(c.Stream.Subjects)
	c.Downstream.PermanentStatuses = slices.Clone(c.Downstream.PermanentStatuses)
	c.Downstream.Headers = maps.Clone(c.Downstream.Headers)
	for name := range c.Downstream.Headers {
		if sensitiveHeader(name) {
			c.Downstream.Headers[name] = redacted
		}
	}
	return c
}

// sensitiveWords mark a header whose value is likely a credential.
var sensitiveWords = []string{"auth", "token", "key", "secret", "password", "passwd", "session", "cookie", "signature", "credential", "jwt"}

// sensitiveHeader reports whether a header's value is hidden from logs:
// Authorization, X-Api-Key, Cookie, X-Session-Token and the like.
func sensitiveHeader(name string) bool {
	lower := strings.ToLower(name)
	return slices.ContainsFunc(sensitiveWords, func(w string) bool { return strings.Contains(lower, w) })
}

// Redacted returns a copy of n with Password, Token and any password or token
// inside URL replaced by "REDACTED" when set.
func (n NATS) Redacted() NATS {
	if n.Password != "" {
		n.Password = redacted
	}
	if n.Token != "" {
		n.Token = redacted
	}
	n.URL = redactURLs(n.URL)
	return n
}

// redactURLs redacts every URL of a comma-separated list.
func redactURLs(s string) string {
	if !strings.ContainsAny(s, "@?") {
		return s
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactURL(p)
	}
	return strings.Join(parts, ",")
}

// redactURL replaces the password in "scheme://user:password@host/..." by
// REDACTED, and user info without a password ("nats://token@host", a token
// to NATS) entirely. It works on text, so a URL that does not parse is
// redacted too, a URL without its scheme ("user:password@host:4222", which
// validation refuses, quoting it) included.
func redactURL(s string) string {
	s = redactQuery(s)
	rest := s
	if _, after, ok := strings.Cut(s, "://"); ok {
		rest = after
	}
	start := len(s) - len(rest)
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return s
	}
	colon := strings.Index(authority[:at], ":")
	if colon < 0 {
		// User info without a password is a token to NATS: hide it all.
		return s[:start] + redacted + s[start+at:]
	}
	return s[:start+colon+1] + redacted + s[start+at:]
}

// redactQuery replaces the value of every query parameter whose name looks
// like a credential (api_key, token, X-Amz-Signature, sig...) by REDACTED:
// a rate engine's URL may carry its key there. Text in, text out, as
// redactURL.
func redactQuery(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	query, fragment := s[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, fragment = query[:h], query[h:]
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		name, _, hasValue := strings.Cut(p, "=")
		if hasValue && (sensitiveHeader(name) || strings.EqualFold(name, "sig")) {
			params[i] = name + "=" + redacted
		}
	}
	return s[:q+1] + strings.Join(params, "&") + fragment
}

// String returns c, redacted, on one line.
func (c Config) String() string {
	return fmt.Sprintf("%+v", plainConfig(c.Redacted()))
}

// Format writes c redacted for every verb, so no fmt verb (%v, %+v, %#v,
// %s, %d...) can print a secret.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// String returns n, redacted, on one line.
func (n NATS) String() string {
	return fmt.Sprintf("%+v", plainNATS(n.Redacted()))
}

// Format writes n redacted for every verb.
func (n NATS) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, n.String()) }

// plainConfig and plainNATS have no methods, so fmt prints their fields.
type (
	plainConfig Config
	plainNATS   NATS
)

// LogValue implements slog.LogValuer: every setting, redacted, grouped by
// its YAML path, so logging a Config never shows a secret.
func (c Config) LogValue() slog.Value { return logGroup(c, "") }

// LogValue implements slog.LogValuer: the nats settings, redacted.
func (n NATS) LogValue() slog.Value { return logGroup(Config{NATS: n}, "nats.") }

// logGroup returns the settings of c under the YAML path prefix as nested
// groups, in table order.
func logGroup(c Config, prefix string) slog.Value {
	r := c.Redacted()
	root := &logNode{}
	for _, s := range settings {
		rest, ok := strings.CutPrefix(s.yaml, prefix)
		if s.field == nil || !ok {
			continue
		}
		n := root
		for key := range strings.SplitSeq(rest, ".") {
			n = n.child(key)
		}
		n.val = logValue(s.field(&r))
	}
	return root.value()
}

// logNode is a group being built, or a leaf when it has no children.
type logNode struct {
	key  string
	val  slog.Value
	kids []*logNode
}

func (n *logNode) child(key string) *logNode {
	for _, k := range n.kids {
		if k.key == key {
			return k
		}
	}
	k := &logNode{key: key}
	n.kids = append(n.kids, k)
	return k
}

func (n *logNode) value() slog.Value {
	if len(n.kids) == 0 {
		return n.val
	}
	attrs := make([]slog.Attr, len(n.kids))
	for i, k := range n.kids {
		attrs[i] = slog.Attr{Key: k.key, Value: k.value()}
	}
	return slog.GroupValue(attrs...)
}

// logValue returns a field as a log value. Durations are text ("30s") so a
// JSON record stays readable.
func logValue(ptr any) slog.Value {
	switch p := ptr.(type) {
	case *string:
		return slog.StringValue(*p)
	case *bool:
		return slog.BoolValue(*p)
	case *int:
		return slog.IntValue(*p)
	case *time.Duration:
		return slog.StringValue(formatDuration(*p))
	case *[]string:
		return slog.AnyValue(slices.Clone(*p))
	case *[]int:
		return slog.AnyValue(slices.Clone(*p))
	case *map[string]string:
		return slog.AnyValue(maps.Clone(*p))
	default:
		return slog.StringValue(formatValue(ptr))
	}
}
