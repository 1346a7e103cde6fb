package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Of returns the classification of err, deciding it if no layer has yet:
// an *Error anywhere in the chain wins; ErrShutdown is a shutdown; timeouts and
// deadlines are transient timeouts; network errors (refused, reset, broken
// pipe, DNS, TLS handshake, unexpected EOF) are transient connection
// failures; everything else is transient and unknown. Of(nil) is nil.
func Of(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Class: Transient, Cause: causeOf(err), Err: err}
}

func causeOf(err error) Cause {
	if errors.Is(err, ErrShutdown) {
		return CauseShutdown
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CauseTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return CauseTimeout
	}
	if isConnection(err) {
		return CauseConnection
	}
	return CauseUnknown
}

func isConnection(err error) bool {
	var (
		opErr   *net.OpError
		dnsErr  *net.DNSError
		recErr  tls.RecordHeaderError
		certErr *tls.CertificateVerificationError
		authErr x509.UnknownAuthorityError
		hostErr x509.HostnameError
		alert   tls.AlertError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &recErr),
		errors.As(err, &certErr), errors.As(err, &authErr), errors.As(err, &hostErr),
		errors.As(err, &alert):
		return true
	}
	return false
}

// IsPermanent reports whether err is classified as permanent.
func IsPermanent(err error) bool {
	e := Of(err)
	return e != nil && e.Class == Permanent
}

// IsTransient reports whether err is a failure that may succeed later.
// It is false for nil.
func IsTransient(err error) bool {
	e := Of(err)
	return e != nil && e.Class == Transient
}

// IsShutdown reports whether err means the work was abandoned because the
// process is shutting down (ErrShutdown in the chain), which is not the read's fault.
func IsShutdown(err error) bool { return errors.Is(err, ErrShutdown) }
