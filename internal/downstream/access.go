package downstream

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Access is how the sink presents itself to the rate engine: a bearer token,
// a client certificate, the CA it trusts, extra headers. The zero value adds
// nothing. Every file is PEM or text read from disk, never a value given
// inline, so no secret needs to be on a command line.
type Access struct {
	// TokenFile holds a bearer token, sent as "Authorization: Bearer
	// <token>" (surrounding white space is trimmed). The file is checked
	// (stat) at most every ReloadInterval, and at once after a 401, and read
	// again when its modification time, size or inode changed, as when a
	// mounted Kubernetes secret is swapped by symlink. A failed re-read keeps
	// the last good token and is logged once.
	TokenFile string
	// ReloadInterval bounds how often TokenFile and the client certificate
	// are checked for a change; required (> 0) with either. The binary's is
	// package config's downstream.reload_interval.
	ReloadInterval time.Duration
	// CAFile holds the CA certificate(s) the rate engine's certificate must
	// chain to, instead of the system's roots. It is read once.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key for
	// mutual TLS: both or neither. They are read again when either changes
	// (checked as TokenFile is, at each new connection).
	CertFile, KeyFile string
	// Headers are sent on every request, e.g. {"X-Tenant": "north"}. A name
	// the sink sets itself is refused (see CheckHeader).
	Headers map[string]string
}

// tls reports whether a sets anything of TLS.
func (a Access) tls() bool { return a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" }

// ReadTokenFile reads a bearer token from path. Its errors name the file
// and never contain any of its content.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s: %w", path, ErrEmptyToken)
	}
	for i := range len(tok) {
		// RFC 9110 field value: visible ASCII, space and tab (obs-text is
		// refused: a token is ASCII).
		if c := tok[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			return "", fmt.Errorf("token file %s: %w (byte %d)", path, ErrTokenCharacter, i+1)
		}
	}
	return tok, nil
}

// Token file errors, matched with errors.Is.
var (
	ErrEmptyToken     = errors.New("holds no token")
	ErrTokenCharacter = errors.New("holds a character a header value cannot carry")
)

// LoadCAFile reads the PEM certificates in path into a pool.
func LoadCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// LoadClientCert reads a client certificate and its private key (PEM).
// Its errors never contain key material.
func LoadClientCert(certFile, keyFile string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return c, nil
}

// reservedHeaders are set by the sink or by the transport; a static header
// of the same name would clash with them.
var reservedHeaders = []string{
	"Content-Type", "Content-Length", "Idempotency-Key", "Host", "Traceparent", "User-Agent",
	// Connection-level: the transport owns them.
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect",
}

// ErrReservedHeader is matched by the error CheckHeader returns for a name
// the sink or the transport sets itself.
var ErrReservedHeader = errors.New("is set by the sink itself")

// CheckHeader reports why a static header cannot be sent: a name that is
// not an HTTP token, a value with a control character, or a name the sink
// sets itself (Content-Type, Idempotency-Key, Host, Content-Length,
// Traceparent, User-Agent, the hop-by-hop headers, and Authorization when
// withToken). The error never contains the value.
func CheckHeader(name, value string, withToken bool) error {
	if !validHeaderName(name) {
		return fmt.Errorf("header name %q: want letters, digits and !#$%%&'*+-.^_`|~ only", name)
	}
	canon := http.CanonicalHeaderKey(name)
	for _, r := range reservedHeaders {
		if canon == r {
			return fmt.Errorf("header %s: %w", canon, ErrReservedHeader)
		}
	}
	if withToken && canon == "Authorization" {
		return fmt.Errorf("header Authorization: %w from the token file", ErrReservedHeader)
	}
	for i := range len(value) {
		if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Errorf("header %s: the value holds a control character (byte %d)", canon, i+1)
		}
	}
	return nil
}

// headerFrom checks every static header and returns them canonicalised;
// two names that differ only in case are refused.
func headerFrom(m map[string]string, withToken bool) (http.Header, error) {
	if len(m) == 0 {
		return nil, nil
	}
	h := make(http.Header, len(m))
	var errs []error
	for name, value := range m {
		if err := CheckHeader(name, value, withToken); err != nil {
			errs = append(errs, err)
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if _, dup := h[canon]; dup {
			errs = append(errs, fmt.Errorf("header %s: given twice", canon))
			continue
		}
		h[canon] = []string{value}
	}
	return h, errors.Join(errs...)
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}
