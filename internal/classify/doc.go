// Package classify decides, once, whether a failure is transient (it will
// succeed once the world recovers) or permanent (it will fail the same way
// forever), and gives it a machine-readable Cause from a closed set.
//
// The decision is carried by *Error, which callers match with errors.As;
// nothing in the project matches on error strings. HTTP responses are
// classified by HTTP (2xx success; the statuses it is given permanent, the
// binary's list being config's; every other status transient), network failures and
// timeouts by Of, and Retry-After is parsed in both of its forms by
// ParseRetryAfter. ErrShutdown marks work abandoned because the process is
// stopping, which is not the read's fault.
//
// The package imports no NATS and no metrics. Everything in it is safe for
// concurrent use.
package classify
