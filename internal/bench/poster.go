package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/meterline/meter-consumer/internal/downstream"
)

// poster is the bare HTTP client: what the HTTP sink does, without the
// pipeline: the same transport, headers and timeout.
type poster struct {
	url    string
	client *http.Client
}

func newPoster(url string, concurrency int) *poster {
	return &poster{url: url, client: &http.Client{Transport: downstream.NewTransport(concurrency)}}
}

// post sends one normalised read and returns the status.
func (p *poster) post(ctx context.Context, body []byte, key string) (int, error) {
	status, _, err := p.do(ctx, body, key)
	return status, err
}

// do sends one normalised read and returns the status and the headers of
// the answer.
func (p *poster) do(ctx context.Context, body []byte, key string) (int, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

func (p *poster) close() { p.client.CloseIdleConnections() }
