package demo_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/demo"
)

// postURL posts a read to url under key and returns the status.
func postURL(ctx context.Context, url, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(readBody))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestStartRateEngineStartsAndStops(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{OKPercent: 100})
	ctx, cancel := context.WithCancel(t.Context())
	url, wait, err := demo.StartRateEngine(ctx, re, "127.0.0.1:0")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"))
	require.True(t, strings.HasSuffix(url, demo.ReadsPath))

	status, err := postURL(t.Context(), url, "k1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)

	status, err = postURL(t.Context(), strings.TrimSuffix(url, demo.ReadsPath)+"/other", "k1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, status)

	cancel()
	require.NoError(t, wait())
	require.NoError(t, wait(), "wait may be called again")

	_, err = postURL(t.Context(), url, "k2")
	require.Error(t, err, "the server no longer listens")
	assert.EqualValues(t, 1, re.Stats().Billed)
}

func TestStartRateEngineAnswersInFlightRequestsOnShutdown(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{SlowPercent: 100, SlowDelay: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	url, wait, err := demo.StartRateEngine(ctx, re, "127.0.0.1:0")
	require.NoError(t, err)

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := postURL(t.Context(), url, "slow")
		done <- result{status, err}
	}()
	require.Eventually(t, func() bool { return re.Stats().Slow == 1 }, 5*time.Second, time.Millisecond)

	cancel()
	require.NoError(t, wait())
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, http.StatusOK, got.status)
	assert.EqualValues(t, 1, re.Stats().Billed)
}

func TestStartRateEngineErrors(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{OKPercent: 100})

	t.Run("nil engine", func(t *testing.T) {
		_, _, err := demo.StartRateEngine(t.Context(), nil, "127.0.0.1:0")
		require.ErrorIs(t, err, demo.ErrConfig)
	})

	t.Run("address in use", func(t *testing.T) {
		var lc net.ListenConfig
		ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		_, _, err = demo.StartRateEngine(t.Context(), re, ln.Addr().String())
		require.Error(t, err)
		assert.ErrorContains(t, err, "listen on")
	})
}
