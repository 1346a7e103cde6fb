// Package downstream delivers a validated meter read to the system that bills
// it. Sink is the interface the consumer pipeline calls; HTTP is the sink the
// binary uses: it POSTs the normalised read as JSON under the read's stable
// idempotency key, over a pooled transport sized for the consumer's
// concurrency, and classifies every outcome with package classify (including
// Retry-After). A redirect is never followed: a 3xx is a failure. Discard
// is the no-op sink of tests and benchmarks.
//
// # The rate engine's door
//
// [Access] says how the sink presents itself: a bearer token read from a
// file and read again when the file changes (a mounted Kubernetes secret is
// swapped by symlink; the file is checked at most every ReloadInterval, and
// at once after a 401), a client certificate for mutual TLS (read again the
// same way, presented by every new connection), a CA in place of the
// system's roots, and static headers. Every request also carries
// "User-Agent: meter-consumer/<version>" and, when the context has one
// ([WithTraceParent]), the W3C traceparent of the read, passed on unchanged.
// [CheckHeader], [ReadTokenFile], [LoadCAFile] and [LoadClientCert] are the
// checks [NewHTTP] runs, exported so that a configuration can be checked
// before anything starts.
//
// # Errors
//
// Errors returned by Deliver are always *classify.Error. NewHTTP's errors
// name the option or file at fault; [ErrEmptyToken], [ErrTokenCharacter]
// and [ErrReservedHeader] are matched with errors.Is. No error and no log
// line holds a token, a key or a header value: a token file that cannot be
// read again keeps the last good token and is logged once, by path.
//
// HTTP and Discard are safe for concurrent use.
package downstream
