package classify

import (
	"errors"
	"fmt"
	"time"
)

// Class says whether a failure can succeed on a later attempt.
type Class int

const (
	// Transient failures will succeed once the world recovers: retry them.
	Transient Class = iota
	// Permanent failures will fail the same way forever: dead-letter them.
	Permanent
)

// String returns "transient" or "permanent", the metric label value.
func (c Class) String() string {
	if c == Permanent {
		return "permanent"
	}
	return "transient"
}

// Cause is a machine-readable reason from a closed set. It is used as a metric
// label, as the TermWithReason text and as the Dlq-Cause header alike.
type Cause string

// The closed set of causes.
const (
	CauseInvalidPayload  Cause = "invalid_payload"
	CausePayloadTooLarge Cause = "payload_too_large"
	CauseHTTP400         Cause = "http_400"
	CauseHTTP404         Cause = "http_404"
	CauseHTTP405         Cause = "http_405"
	CauseHTTP408         Cause = "http_408"
	CauseHTTP410         Cause = "http_410"
	CauseHTTP413         Cause = "http_413"
	CauseHTTP414         Cause = "http_414"
	CauseHTTP415         Cause = "http_415"
	CauseHTTP422         Cause = "http_422"
	CauseHTTP425         Cause = "http_425"
	CauseRateLimited     Cause = "rate_limited" // HTTP 429
	CauseHTTP500         Cause = "http_500"
	CauseHTTP502         Cause = "http_502"
	CauseHTTP503         Cause = "http_503"
	CauseHTTP504         Cause = "http_504"
	CauseHTTP4xx         Cause = "http_4xx"   // any other 4xx
	CauseHTTP5xx         Cause = "http_5xx"   // any other 5xx
	CauseHTTPOther       Cause = "http_other" // 1xx or a status outside 100-599
	// CauseRedirect: a 3xx. A delivery is a 2xx answer to the POST itself;
	// a redirect is never followed (a followed 302 turns into a GET without
	// the body, whose 200 would ack a read nobody billed).
	CauseRedirect   Cause = "redirect"
	CauseTimeout    Cause = "timeout"
	CauseConnection Cause = "connection"
	CausePanic      Cause = "panic"
	CauseShutdown   Cause = "shutdown"
	// CauseUnsettled: a delivery past the attempt limit, because an earlier
	// delivery ended without settling (a crash, an ack timeout, or a
	// dead-letter copy that could not be stored).
	CauseUnsettled Cause = "unsettled"
	CauseUnknown   Cause = "unknown"
)

// Causes returns every cause in the closed set, so that metrics can
// initialise each label value to zero.
func Causes() []Cause {
	return []Cause{
		CauseInvalidPayload, CausePayloadTooLarge,
		CauseHTTP400, CauseHTTP404, CauseHTTP405, CauseHTTP408, CauseHTTP410,
		CauseHTTP413, CauseHTTP414, CauseHTTP415, CauseHTTP422, CauseHTTP425,
		CauseRateLimited, CauseHTTP500, CauseHTTP502, CauseHTTP503, CauseHTTP504,
		CauseHTTP4xx, CauseHTTP5xx, CauseHTTPOther, CauseRedirect,
		CauseTimeout, CauseConnection, CausePanic, CauseShutdown, CauseUnsettled, CauseUnknown,
	}
}

// ErrShutdown marks work abandoned because the process is shutting down. It is
// not the read's fault: callers hand the read back without charging it.
var ErrShutdown = errors.New("shutting down")

// Error is a classified failure. Match it with errors.As; its Class and Cause
// are decided once, where the failure is first understood.
type Error struct {
	Class Class
	Cause Cause
	// RetryAfter is how long the downstream asked us to wait (zero if it did not say).
	RetryAfter time.Duration
	Err        error
}

// Error returns the cause followed by the underlying error.
func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s %s failure", e.Class, e.Cause)
	}
	return fmt.Sprintf("%s: %v", e.Cause, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// NewTransient wraps err as a transient failure with the given cause.
func NewTransient(cause Cause, err error) *Error {
	return &Error{Class: Transient, Cause: cause, Err: err}
}

// NewPermanent wraps err as a permanent failure with the given cause.
func NewPermanent(cause Cause, err error) *Error {
	return &Error{Class: Permanent, Cause: cause, Err: err}
}
