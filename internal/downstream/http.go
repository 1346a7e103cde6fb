package downstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/version"
)

// Sink delivers one read. A nil error means the read is billed (or was
// already, under the same idempotency key).
type Sink interface {
	Deliver(ctx context.Context, r meter.Read) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, r meter.Read) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, r meter.Read) error { return f(ctx, r) }

var _ Sink = (*HTTP)(nil)

// HTTPOptions configures an HTTP sink.
type HTTPOptions struct {
	URL string
	// Timeout bounds one request, from dial to the end of the response body.
	Timeout time.Duration
	// Concurrency sizes the connection pool (idle connections per host).
	Concurrency int
	// Classifier decides permanent statuses; required (the binary builds it
	// from config's downstream.permanent_statuses).
	Classifier *classify.HTTP
	// Client replaces the built-in client (tests); its Timeout is left as
	// is, its CheckRedirect is replaced: redirects are never followed. It
	// cannot be given with Access's TLS files, which need the built-in
	// transport.
	Client *http.Client
	// Access is the bearer token, client certificate, CA and static headers
	// the rate engine wants; the zero value adds nothing.
	Access Access
	// UserAgent is sent on every request; "" means meter-consumer/<version>.
	UserAgent string
	// Logger receives the lines about the token file and the client
	// certificate being read again (never their content); nil discards them.
	Logger *slog.Logger
	// mono is the monotonic clock of the reload checks; nil is
	// clock.System().Mono.
	mono func() time.Duration
}

// HTTP posts reads to a URL.
type HTTP struct {
	url        string
	timeout    time.Duration
	client     *http.Client
	classifier *classify.HTTP
	userAgent  string
	headers    http.Header                // static, shared by every request: never modified
	token      *reloaded[string]          // nil without a token file
	cert       *reloaded[tls.Certificate] // nil without a client certificate
}

// NewHTTP validates the options and builds the sink.
func NewHTTP(o HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := "(unparsable)"
		if err == nil {
			shown = u.Redacted() // a password in the user info is a secret
		}
		return nil, fmt.Errorf("downstream url %q: must be an absolute http or https URL", shown)
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("downstream timeout (%s): must be > 0", o.Timeout)
	}
	if o.Classifier == nil {
		return nil, errors.New("downstream classifier: required")
	}
	if o.UserAgent == "" {
		o.UserAgent = version.Get().UserAgent()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.mono == nil {
		o.mono = clock.System().Mono
	}
	a := o.Access
	if (a.TokenFile != "" || a.CertFile != "" && a.KeyFile != "") && a.ReloadInterval <= 0 {
		return nil, fmt.Errorf("downstream: Access.ReloadInterval (%s) must be > 0 with a token file or a client certificate", a.ReloadInterval)
	}
	h := &HTTP{url: o.URL, timeout: o.Timeout, classifier: o.Classifier, userAgent: o.UserAgent}
	if h.headers, err = headerFrom(a.Headers, a.TokenFile != ""); err != nil {
		return nil, fmt.Errorf("downstream headers: %w", err)
	}
	if a.TokenFile != "" {
		h.token, err = newReloaded("downstream token file", []string{a.TokenFile}, a.ReloadInterval,
			func() (string, error) { return ReadTokenFile(a.TokenFile) }, o.mono, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("downstream token: %w", err)
		}
	}

	client := &http.Client{Transport: NewTransport(max(o.Concurrency, 1))}
	switch {
	case o.Client != nil && a.tls():
		return nil, errors.New("downstream: a Client and TLS files are exclusive: give the files, or a Client whose transport has them")
	case o.Client != nil:
		c := *o.Client
		client = &c
	case a.tls():
		tc, err := h.tlsConfig(a, o.mono, o.Logger)
		if err != nil {
			return nil, err
		}
		client.Transport.(*http.Transport).TLSClientConfig = tc
	}
	// A delivery is a 2xx answer to the POST of the read's body to the
	// configured URL, nothing else: a followed 302 would become a GET without
	// the body, and the 200 of a login page would ack a read nobody billed.
	// The 3xx itself is returned and classified (classify.CauseRedirect).
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h.client = client
	return h, nil
}

// tlsConfig returns the client side of TLS that a asks for: a CA pool in
// place of the system's, a client certificate read again when it changes.
func (h *HTTP) tlsConfig(a Access, mono func() time.Duration, log *slog.Logger) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.CAFile != "" {
		pool, err := LoadCAFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("downstream TLS: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case a.CertFile != "" && a.KeyFile != "":
		var err error
		h.cert, err = newReloaded("downstream client certificate", []string{a.CertFile, a.KeyFile}, a.ReloadInterval,
			func() (tls.Certificate, error) { return LoadClientCert(a.CertFile, a.KeyFile) }, mono, log)
		if err != nil {
			return nil, fmt.Errorf("downstream TLS: %w", err)
		}
		// Asked at each handshake: a new connection presents the newest.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := h.cert.Get()
			return &c, nil
		}
	case a.CertFile != "" || a.KeyFile != "":
		return nil, errors.New("downstream TLS: a client certificate needs its key, and a key its certificate")
	}
	return tc, nil
}

// NewTransport returns a transport whose pool keeps one idle connection per
// concurrent request, so steady traffic reuses connections instead of dialling.
func NewTransport(concurrency int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          concurrency * 2,
		MaxIdleConnsPerHost:   concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// CloseIdle closes pooled connections (at shutdown).
func (h *HTTP) CloseIdle() { h.client.CloseIdleConnections() }

// Deliver POSTs the normalised read with its Idempotency-Key header, the
// static headers, the User-Agent, the bearer token when a token file is set,
// and the traceparent ctx carries (WithTraceParent).
func (h *HTTP) Deliver(ctx context.Context, r meter.Read) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()

	// The transport may still read the body after Do returns, so the buffer
	// is not pooled.
	body := r.AppendJSON(make([]byte, 0, 256))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return classify.NewPermanent(classify.CauseUnknown, fmt.Errorf("build request: %w", err))
	}
	for k, v := range h.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	req.Header.Set("User-Agent", h.userAgent)
	if h.token != nil {
		req.Header.Set("Authorization", "Bearer "+h.token.Get())
	}
	if tp := traceParent(ctx); tp != "" {
		req.Header.Set("Traceparent", tp)
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return classify.Of(fmt.Errorf("post read: %w", unwrapURL(err)))
	}
	if resp.StatusCode == http.StatusUnauthorized && h.token != nil {
		h.token.CheckSoon() // the token may have rotated since the last check
	}
	// Drain a bounded amount so the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return h.classifier.Response(resp)
}

// unwrapURL drops *url.Error's "Post \"...\":" prefix text but keeps the chain.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Timeout is the bound of one call: a caller need not add its own.
func (h *HTTP) Timeout() time.Duration { return h.timeout }
