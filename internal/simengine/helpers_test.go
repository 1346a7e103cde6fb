package simengine_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// No goroutine outlives the servers the tests start (a timer freeing an
// abandoned call's server is not a goroutine until it fires).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const readBody = `{"meter_id":"MTR-00042","read_at":"2026-11-30T07:00:00+01:00","quantity":"1234.567","unit":"kWh"}`

// answer is what a client got: a status and headers, or an error.
type answer struct {
	key    string
	status int
	header http.Header
	err    error
}

// post posts a read under key to s, as the consumer's sink does.
func post(ctx context.Context, s *simengine.Server, key string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/reads", strings.NewReader(readBody))
	if err != nil {
		return answer{key: key, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(simengine.KeyHeader, key)
	resp, err := s.Client().Do(req)
	if err != nil {
		return answer{key: key, err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return answer{key: key, status: resp.StatusCode, header: resp.Header}
}

// start makes an engine from o and serves it until the test ends.
func start(t *testing.T, o simengine.Options) *simengine.Server {
	t.Helper()
	e, err := simengine.New(o)
	require.NoError(t, err)
	s := simengine.NewServer(e)
	t.Cleanup(s.Close)
	return s
}

// await waits until cond holds for s's Stats; it fails the test after 10s
// (a condition that should hold long before).
func await(t *testing.T, s *simengine.Server, cond func(simengine.Stats) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Await(ctx, cond), "stats: %+v", s.Stats())
}

// outcomes lists the outcome of every call of key.
func outcomes(calls []simengine.Call) []simengine.Outcome {
	out := make([]simengine.Outcome, len(calls))
	for i, c := range calls {
		out[i] = c.Outcome
	}
	return out
}
