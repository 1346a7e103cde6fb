package downstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/meter"
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
	// Classifier decides permanent statuses; nil means the defaults.
	Classifier *classify.HTTP
	// Client replaces the built-in client (tests, TLS); its Timeout is left
	// as is, its CheckRedirect is replaced: redirects are never followed.
	Client *http.Client
}

// HTTP posts reads to a URL.
type HTTP struct {
	url        string
	timeout    time.Duration
	client     *http.Client
	classifier *classify.HTTP
}

// NewHTTP validates the options and builds the sink.
func NewHTTP(o HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("downstream url %q: must be an absolute http or https URL", o.URL)
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("downstream timeout (%s): must be > 0", o.Timeout)
	}
	if o.Classifier == nil {
		o.Classifier, _ = classify.NewHTTP(nil, nil)
	}
	client := &http.Client{Transport: NewTransport(max(o.Concurrency, 1))}
	if o.Client != nil {
		c := *o.Client
		client = &c
	}
	// A delivery is a 2xx answer to the POST of the read's body to the
	// configured URL, nothing else: a followed 302 would become a GET without
	// the body, and the 200 of a login page would ack a read nobody billed.
	// The 3xx itself is returned and classified (classify.CauseRedirect).
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h := &HTTP{url: o.URL, timeout: o.Timeout, client: client, classifier: o.Classifier}
	return h, nil
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

// Deliver POSTs the normalised read with its Idempotency-Key header.
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
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", r.IdempotencyKey)

	resp, err := h.client.Do(req)
	if err != nil {
		return classify.Of(fmt.Errorf("post read: %w", unwrapURL(err)))
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
