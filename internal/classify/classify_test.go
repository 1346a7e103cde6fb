package classify_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/meterline/meter-consumer/config"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestOf(t *testing.T) {
	tests := []struct {
		name      string
		give      error
		wantClass classify.Class
		wantCause classify.Cause
	}{
		{"deadline", context.DeadlineExceeded, classify.Transient, classify.CauseTimeout},
		{"wrapped deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), classify.Transient, classify.CauseTimeout},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, classify.Transient, classify.CauseTimeout},
		{"os deadline", os.ErrDeadlineExceeded, classify.Transient, classify.CauseTimeout},
		{"refused", &net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, classify.Transient, classify.CauseConnection},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), classify.Transient, classify.CauseConnection},
		{"broken pipe", syscall.EPIPE, classify.Transient, classify.CauseConnection},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", Name: "rate", IsTemporary: true}, classify.Transient, classify.CauseConnection},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "rate", IsNotFound: true}, classify.Transient, classify.CauseConnection},
		{"tls record", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, classify.Transient, classify.CauseConnection},
		{"tls alert", fmt.Errorf("remote error: %w", tls.AlertError(40)), classify.Transient, classify.CauseConnection},
		{"unexpected eof", io.ErrUnexpectedEOF, classify.Transient, classify.CauseConnection},
		{"shutdown", fmt.Errorf("post: %w", classify.ErrShutdown), classify.Transient, classify.CauseShutdown},
		{"unknown", errors.New("something odd"), classify.Transient, classify.CauseUnknown},
		{"cancelled without shutdown", context.Canceled, classify.Transient, classify.CauseUnknown},
		{"classified wins", fmt.Errorf("deliver: %w", classify.NewPermanent(classify.CauseHTTP422, context.DeadlineExceeded)), classify.Permanent, classify.CauseHTTP422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify.Of(tt.give)
			require.NotNil(t, got)
			assert.Equal(t, tt.wantClass, got.Class)
			assert.Equal(t, tt.wantCause, got.Cause)
			assert.True(t, errors.Is(got, tt.give) || errors.Is(tt.give, got), "the classified error keeps its chain")
			assert.Equal(t, tt.wantClass == classify.Transient, classify.IsTransient(tt.give))
			assert.Equal(t, tt.wantClass == classify.Permanent, classify.IsPermanent(tt.give))
		})
	}
	assert.Nil(t, classify.Of(nil))
	assert.False(t, classify.IsTransient(nil))
	assert.False(t, classify.IsPermanent(nil))
	assert.True(t, classify.IsShutdown(fmt.Errorf("x: %w", classify.ErrShutdown)))
}

func TestHTTPStatus(t *testing.T) {
	h, err := classify.NewHTTP(binaryPermanent, nil)
	require.NoError(t, err)
	tests := []struct {
		give      int
		wantOK    bool
		wantClass classify.Class
		wantCause classify.Cause
	}{
		{200, true, 0, ""}, {201, true, 0, ""}, {204, true, 0, ""}, {299, true, 0, ""},
		{400, false, classify.Permanent, classify.CauseHTTP400},
		{404, false, classify.Permanent, classify.CauseHTTP404},
		{405, false, classify.Permanent, classify.CauseHTTP405},
		{410, false, classify.Permanent, classify.CauseHTTP410},
		{413, false, classify.Permanent, classify.CauseHTTP413},
		{414, false, classify.Permanent, classify.CauseHTTP414},
		{415, false, classify.Permanent, classify.CauseHTTP415},
		{422, false, classify.Permanent, classify.CauseHTTP422},
		{408, false, classify.Transient, classify.CauseHTTP408},
		{425, false, classify.Transient, classify.CauseHTTP425},
		{429, false, classify.Transient, classify.CauseRateLimited},
		{500, false, classify.Transient, classify.CauseHTTP500},
		{502, false, classify.Transient, classify.CauseHTTP502},
		{503, false, classify.Transient, classify.CauseHTTP503},
		{504, false, classify.Transient, classify.CauseHTTP504},
		{401, false, classify.Transient, classify.CauseHTTP4xx},
		{403, false, classify.Transient, classify.CauseHTTP4xx},
		{409, false, classify.Transient, classify.CauseHTTP4xx},
		{501, false, classify.Transient, classify.CauseHTTP5xx},
		{599, false, classify.Transient, classify.CauseHTTP5xx},
		{302, false, classify.Transient, classify.CauseRedirect},
		{100, false, classify.Transient, classify.CauseHTTPOther},
		{700, false, classify.Transient, classify.CauseHTTPOther},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			err := h.Status(tt.give, "")
			if tt.wantOK {
				assert.NoError(t, err)
				return
			}
			var ce *classify.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.wantClass, ce.Class)
			assert.Equal(t, tt.wantCause, ce.Cause)
			var se *classify.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.give, se.Code)
			assert.Contains(t, err.Error(), fmt.Sprint(tt.give))
		})
	}
}

func TestHTTPConfigurablePermanentSet(t *testing.T) {
	h, err := classify.NewHTTP([]int{409, 422}, nil)
	require.NoError(t, err)
	assert.True(t, classify.IsPermanent(h.Status(409, "")))
	assert.True(t, classify.IsTransient(h.Status(400, "")), "400 is no longer in the set")

	_, err = classify.NewHTTP([]int{200}, nil)
	assert.ErrorContains(t, err, "permanent status 200")
}

func TestHTTPRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	h, err := classify.NewHTTP(binaryPermanent, func() time.Time { return now })
	require.NoError(t, err)

	tests := []struct {
		name string
		code int
		give string
		want time.Duration
	}{
		{"429 seconds", 429, "2", 2 * time.Second},
		{"503 date", 503, "Mon, 30 Nov 2026 07:01:30 GMT", 90 * time.Second},
		{"500 seconds", 500, "7", 7 * time.Second},
		{"garbage ignored", 429, "soon", 0},
		{"permanent ignores header", 422, "5", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ce := classify.Of(h.Status(tt.code, tt.give))
			require.NotNil(t, ce)
			assert.Equal(t, tt.want, ce.RetryAfter)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 3 ", 3 * time.Second, true},
		{"99999999999999999999999", 24 * time.Hour, true},
		{"Mon, 30 Nov 2026 07:00:10 GMT", 10 * time.Second, true},
		{"Monday, 30-Nov-26 07:00:10 GMT", 10 * time.Second, true},
		{"Mon Nov 30 07:00:10 2026", 10 * time.Second, true},
		{"Sun, 29 Nov 2026 07:00:00 GMT", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"tomorrow", 0, false},
		{"\x00", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, ok := classify.ParseRetryAfter(tt.give, now)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCausesClosedSet(t *testing.T) {
	seen := map[classify.Cause]bool{}
	for _, c := range classify.Causes() {
		assert.False(t, seen[c], "duplicate cause %q", c)
		seen[c] = true
	}
	for code := 0; code < 1000; code++ {
		assert.True(t, seen[classify.StatusCause(code)], "status %d maps outside the set", code)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Mon, 30 Nov 2026 07:00:10 GMT", "-1", "garbage", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := classify.ParseRetryAfter(s, now)
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v out of range", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok=false", s, d)
		}
	})
}

func ExampleHTTP_Status() {
	h, _ := classify.NewHTTP(binaryPermanent, nil)
	for _, code := range []int{200, 422, 429, 503, 418} {
		err := h.Status(code, "2")
		if err == nil {
			fmt.Println(code, "success")
			continue
		}
		ce := classify.Of(err)
		fmt.Println(code, ce.Class, ce.Cause, ce.RetryAfter)
	}
	// Output:
	// 200 success
	// 422 permanent http_422 0s
	// 429 transient rate_limited 2s
	// 503 transient http_503 2s
	// 418 transient http_4xx 2s
}

func FuzzStatus(f *testing.F) {
	for _, code := range []int{200, 204, 400, 422, 429, 500, 503, 0, -1, 999} {
		f.Add(code, "2")
	}
	f.Add(503, "Mon, 30 Nov 2026 07:00:10 GMT")
	h, err := classify.NewHTTP(binaryPermanent, func() time.Time { return time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC) })
	if err != nil {
		f.Fatal(err)
	}
	causes := map[classify.Cause]bool{}
	for _, c := range classify.Causes() {
		causes[c] = true
	}
	f.Fuzz(func(t *testing.T, code int, retryAfter string) {
		err := h.Status(code, retryAfter)
		if code >= 200 && code <= 299 {
			if err != nil {
				t.Fatalf("%d: %v", code, err)
			}
			return
		}
		ce := classify.Of(err)
		if ce == nil || !causes[ce.Cause] {
			t.Fatalf("%d: cause outside the closed set: %v", code, ce)
		}
		if ce.Class == classify.Permanent && !slices.Contains(binaryPermanent, code) {
			t.Fatalf("%d classified permanent", code)
		}
		if ce.RetryAfter < 0 || ce.RetryAfter > 24*time.Hour {
			t.Fatalf("retry-after %v out of range", ce.RetryAfter)
		}
	})
}

// binaryPermanent is the binary's default list of permanent statuses.
var binaryPermanent = config.Default().Downstream.PermanentStatuses

// The engine's "already billed" (docs/CONTRACT.md): a 409 with
// Already-Billed: true is a success, even where 409 is configured
// permanent; any other 409 is classified by its status.
func TestAlreadyBilledIsASuccess(t *testing.T) {
	t.Parallel()
	h, err := classify.NewHTTP([]int{409, 422}, nil)
	require.NoError(t, err)
	resp := func(code int, billed string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if billed != "" {
			r.Header.Set(classify.HeaderAlreadyBilled, billed)
		}
		return r
	}
	tests := []struct {
		name    string
		resp    *http.Response
		success bool
	}{
		{"409, already billed", resp(409, "true"), true},
		{"409, already billed, any case", resp(409, " TRUE "), true},
		{"409 without the header: the key is in use", resp(409, ""), false},
		{"409, the header false", resp(409, "false"), false},
		{"422 with the header: only a 409 says it", resp(422, "true"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.Response(tt.resp)
			assert.Equal(t, tt.success, err == nil, "%v", err)
			assert.Equal(t, tt.success, classify.AlreadyBilled(tt.resp))
		})
	}
}
