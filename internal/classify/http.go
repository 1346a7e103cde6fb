package classify

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTP classifies HTTP responses. Build it with NewHTTP; it is safe for
// concurrent use.
type HTTP struct {
	permanent map[int]bool
	now       func() time.Time
}

// NewHTTP returns a classifier that treats the given statuses as permanent:
// those that fail the same way on every attempt (the binary's list is
// config's downstream.permanent_statuses). Every other non-2xx status is
// transient: an unknown failure must not throw a read away, the attempt
// limit bounds it and the dead-letter subject keeps it. now may be nil for
// the wall clock.
func NewHTTP(permanent []int, now func() time.Time) (*HTTP, error) {
	set := make(map[int]bool, len(permanent))
	for _, s := range permanent {
		if s < 400 || s > 599 {
			return nil, fmt.Errorf("permanent status %d: must be a 4xx or 5xx status", s)
		}
		set[s] = true
	}
	if now == nil {
		now = time.Now
	}
	return &HTTP{permanent: set, now: now}, nil
}

// HeaderAlreadyBilled is how a rate engine that answers a repeated
// idempotency key with 409 Conflict says the key's first request was
// billed (docs/CONTRACT.md): "true" makes the 409 a success.
const HeaderAlreadyBilled = "Already-Billed"

// Response classifies a response by its status: nil for 2xx, and for a 409
// whose Already-Billed header is "true" (the engine billed this key
// before: a delivery whose ack was lost); otherwise an *Error whose Class
// follows the permanent set and whose RetryAfter comes from the
// Retry-After header of a transient response. A 409 without it is the
// engine's "this key is in use" (its first request still in progress, as
// the IETF idempotency-key draft has it): classified by its status, as any
// other.
func (h *HTTP) Response(resp *http.Response) error {
	if AlreadyBilled(resp) {
		return nil
	}
	err := h.Status(resp.StatusCode, resp.Header.Get("Retry-After"))
	if e, ok := err.(*Error); ok && e.Cause == CauseRedirect {
		e.Err = &StatusError{Code: resp.StatusCode, Location: redactLocation(resp.Header.Get("Location"))}
	}
	return err
}

// AlreadyBilled reports whether resp is the engine's "already billed": 409
// Conflict with Already-Billed: true.
func AlreadyBilled(resp *http.Response) bool {
	return resp.StatusCode == http.StatusConflict && strings.EqualFold(strings.TrimSpace(resp.Header.Get(HeaderAlreadyBilled)), "true")
}

// redactLocation keeps the scheme, host and path of a redirect target: a
// query string or user info may carry a token.
func redactLocation(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	return u.String()
}

// Status classifies a status code and its Retry-After header value.
func (h *HTTP) Status(code int, retryAfter string) error {
	if code >= 200 && code <= 299 {
		return nil
	}
	e := &Error{Class: Transient, Cause: StatusCause(code), Err: &StatusError{Code: code}}
	if h.permanent[code] {
		e.Class = Permanent
		return e
	}
	if d, ok := ParseRetryAfter(retryAfter, h.now()); ok {
		e.RetryAfter = d
	}
	return e
}

// StatusError is a non-2xx HTTP status from the downstream.
type StatusError struct {
	Code int
	// Location is where a 3xx pointed (scheme, host and path only).
	Location string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("downstream answered %d", e.Code)
	if t := http.StatusText(e.Code); t != "" {
		s += " " + t
	}
	if e.Code >= 300 && e.Code <= 399 {
		s += " (a redirect is not followed: point downstream.url at the final address"
		if e.Location != "" {
			s += ", here " + e.Location
		}
		s += ")"
	}
	return s
}

// StatusCause maps a status to its cause in the closed set.
func StatusCause(code int) Cause {
	switch code {
	case 400:
		return CauseHTTP400
	case 404:
		return CauseHTTP404
	case 405:
		return CauseHTTP405
	case 408:
		return CauseHTTP408
	case 410:
		return CauseHTTP410
	case 413:
		return CauseHTTP413
	case 414:
		return CauseHTTP414
	case 415:
		return CauseHTTP415
	case 422:
		return CauseHTTP422
	case 425:
		return CauseHTTP425
	case 429:
		return CauseRateLimited
	case 500:
		return CauseHTTP500
	case 502:
		return CauseHTTP502
	case 503:
		return CauseHTTP503
	case 504:
		return CauseHTTP504
	}
	switch {
	case code >= 300 && code <= 399:
		return CauseRedirect
	case code >= 400 && code <= 499:
		return CauseHTTP4xx
	case code >= 500 && code <= 599:
		return CauseHTTP5xx
	}
	return CauseHTTPOther
}

// maxRetryAfter bounds the delta-seconds form before it becomes a Duration,
// so a huge number cannot overflow. Callers clamp further (retry's
// MaxServerWait).
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After value in either form: delta-seconds
// ("120") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"). A date in the
// past gives zero. Garbage, negative numbers and empty values give ok=false.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange && allDigits(v) {
				return maxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, maxRetryAfter), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
