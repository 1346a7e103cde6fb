package service_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/service"
)

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "meter_consumer_probe_total", Help: "x"})
	reg.MustRegister(c)
	ready, reason := false, "not connected to NATS (RECONNECTING)"
	srv := httptest.NewServer(service.Handler(reg, func() (bool, string) { return ready, reason }))
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		path       string
		ready      bool
		wantStatus int
		wantBody   string
	}{
		{"/healthz", false, 200, "ok"},
		{"/readyz", false, 503, "not connected to NATS"},
		{"/readyz", true, 200, "ok"},
		{"/metrics", false, 200, "meter_consumer_probe_total 0"},
		{"/nothing", true, 404, ""},
	}
	for _, tt := range tests {
		ready = tt.ready
		if tt.ready {
			reason = "ok"
		}
		code, body := get(tt.path)
		assert.Equal(t, tt.wantStatus, code, tt.path)
		assert.Contains(t, body, tt.wantBody, tt.path)
	}
}
