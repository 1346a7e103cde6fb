package downstream_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/version"
)

// recorder is a rate engine that keeps the headers of every request and
// answers what status says (200 when nil).
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
	peers   []string // common name of the client certificate, "" without one
	status  func(r *http.Request) int
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.headers = append(rec.headers, r.Header.Clone())
	peer := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		peer = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	rec.peers = append(rec.peers, peer)
	rec.mu.Unlock()
	if rec.status != nil {
		w.WriteHeader(rec.status(r))
	}
}

func (rec *recorder) last() (http.Header, string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.headers) == 0 {
		return nil, ""
	}
	return rec.headers[len(rec.headers)-1], rec.peers[len(rec.peers)-1]
}

const (
	tokOne   = "tok-one-5ecret-AAAA"
	tokTwo   = "tok-two-5ecret-BBBB"
	tokThree = "tok-three-5ecret-CCCC"
)

var tokens = []string{tokOne, tokTwo, tokThree}

func assertNoToken(t *testing.T, what, s string) {
	t.Helper()
	for _, tok := range tokens {
		assert.NotContains(t, s, tok, what)
	}
	assert.NotContains(t, s, "5ecret", what)
}

// tokenSink builds a sink with a token from sec, a custom CA and a test
// clock, logging to log.
func tokenSink(t *testing.T, srv *httptest.Server, sec *secret, clk *clock, log *syncBuffer) *downstream.HTTP {
	t.Helper()
	o := downstream.HTTPOptions{
		URL: srv.URL, Timeout: 2 * time.Second, Classifier: binaryClassifier,
		Access: downstream.Access{TokenFile: sec.path("token"), CAFile: caOf(t, srv), ReloadInterval: 10 * time.Second},
		Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	h, err := downstream.NewHTTP(downstream.WithClock(o, clk.Mono))
	require.NoError(t, err)
	return h
}

func auth(rec *recorder) string {
	h, _ := rec.last()
	return h.Get("Authorization")
}

func TestBearerTokenRotatesWithTheMountedSecret(t *testing.T) {
	rec := &recorder{}
	srv := tlsServer(t, rec)
	sec := newSecret(t, map[string][]byte{"token": []byte(tokOne + "\n")})
	clk := newClock()
	var log syncBuffer
	h := tokenSink(t, srv, sec, clk, &log)

	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	assert.Equal(t, "Bearer "+tokOne, auth(rec), "trailing new line trimmed")

	sec.update(map[string][]byte{"token": []byte(tokTwo)})
	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	assert.Equal(t, "Bearer "+tokOne, auth(rec), "not checked again before the interval")

	clk.Add(10 * time.Second)
	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	assert.Equal(t, "Bearer "+tokTwo, auth(rec), "the swapped secret is read at the next check")
	assert.Contains(t, log.String(), "downstream token file changed; read again")
	assertNoToken(t, "log", log.String())
}

// A rate engine that already moved to the new token answers 401 to the old
// one: the file is checked at once, not at the end of the interval.
func TestBearerTokenCheckedAtOnceAfter401(t *testing.T) {
	rec := &recorder{status: func(r *http.Request) int {
		if r.Header.Get("Authorization") != "Bearer "+tokTwo {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	}}
	srv := tlsServer(t, rec)
	sec := newSecret(t, map[string][]byte{"token": []byte(tokOne)})
	clk := newClock()
	var log syncBuffer
	h := tokenSink(t, srv, sec, clk, &log)

	sec.update(map[string][]byte{"token": []byte(tokTwo)})
	err := h.Deliver(t.Context(), mustRead(t))
	var ce *classify.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, classify.Transient, ce.Class, "a 401 is retried")
	assertNoToken(t, "error", err.Error())

	require.NoError(t, h.Deliver(t.Context(), mustRead(t)), "the next delivery reads the new token; the clock did not move")
	assert.Equal(t, "Bearer "+tokTwo, auth(rec))
}

func TestFailedTokenReReadKeepsTheLastGoodOneAndLogsOnce(t *testing.T) {
	rec := &recorder{}
	srv := tlsServer(t, rec)
	sec := newSecret(t, map[string][]byte{"token": []byte(tokOne)})
	clk := newClock()
	var log syncBuffer
	h := tokenSink(t, srv, sec, clk, &log)

	steps := []struct {
		name     string
		update   map[string][]byte // nil: no change
		wantAuth string
	}{
		{"the key is gone from the secret", map[string][]byte{"other": []byte("x")}, tokOne},
		{"still gone", nil, tokOne},
		{"empty", map[string][]byte{"token": []byte("\n")}, tokOne},
		{"a control character", map[string][]byte{"token": []byte(tokTwo + "\x00" + tokThree)}, tokOne},
		{"good again", map[string][]byte{"token": []byte(tokThree)}, tokThree},
	}
	for _, st := range steps {
		if st.update != nil {
			sec.update(st.update)
		}
		clk.Add(10 * time.Second)
		require.NoError(t, h.Deliver(t.Context(), mustRead(t)), st.name)
		assert.Equal(t, "Bearer "+st.wantAuth, auth(rec), st.name)
	}
	out := log.String()
	assert.Equal(t, 1, strings.Count(out, "could not be read again; keeping the last good one"), "logged once for the whole failing stretch:\n%s", out)
	assert.Contains(t, out, sec.path("token"), "the log names the file")
	assert.Contains(t, out, "no such file or directory")
	assert.Equal(t, 1, strings.Count(out, "changed; read again"))
	assertNoToken(t, "log", out)
}

func TestTokenFileAtStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	tests := []struct {
		name    string
		give    string
		wantErr error
	}{
		{"missing", filepath.Join(dir, "none"), os.ErrNotExist},
		{"empty", write("empty", " \n\t\n"), downstream.ErrEmptyToken},
		{"a new line inside", write("newline", tokOne+"\n"+tokTwo), downstream.ErrTokenCharacter},
		{"not ASCII", write("utf8", tokOne+"é"), downstream.ErrTokenCharacter},
		{"a directory", dir, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: "https://127.0.0.1/reads", Timeout: time.Second,
				Access: downstream.Access{TokenFile: tt.give, ReloadInterval: 10 * time.Second}})
			require.Error(t, err)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			}
			assert.Contains(t, err.Error(), tt.give, "the error names the file")
			assertNoToken(t, "error", err.Error())
		})
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	rec := &recorder{}
	srv := p.mtlsServer(t, rec)
	certPEM, keyPEM := p.leaf(t, "meter-consumer", x509.ExtKeyUsageClientAuth)
	sec := newSecret(t, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})

	tests := []struct {
		name     string
		give     downstream.Access
		wantPeer string // "" when the handshake must fail
	}{
		{"client certificate and CA", downstream.Access{CAFile: p.CAFile, CertFile: sec.path("tls.crt"), KeyFile: sec.path("tls.key"), ReloadInterval: 10 * time.Second}, "meter-consumer"},
		{"no client certificate", downstream.Access{CAFile: p.CAFile}, ""},
		{"the system's roots do not know the CA", downstream.Access{CertFile: sec.path("tls.crt"), KeyFile: sec.path("tls.key"), ReloadInterval: 10 * time.Second}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Access: tt.give})
			require.NoError(t, err)
			defer h.CloseIdle()
			err = h.Deliver(t.Context(), mustRead(t))
			if tt.wantPeer == "" {
				var ce *classify.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, classify.Transient, ce.Class, err.Error())
				return
			}
			require.NoError(t, err)
			_, peer := rec.last()
			assert.Equal(t, tt.wantPeer, peer)
		})
	}
}

// cert-manager renews the client certificate in place: a new connection
// presents the new one, without a restart.
func TestClientCertificateIsReadAgainWhenItChanges(t *testing.T) {
	p := newPKI(t)
	rec := &recorder{}
	srv := p.mtlsServer(t, rec)
	certPEM, keyPEM := p.leaf(t, "meter-consumer-1", x509.ExtKeyUsageClientAuth)
	sec := newSecret(t, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	clk := newClock()
	var log syncBuffer
	o := downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second,
		Access: downstream.Access{CAFile: p.CAFile, CertFile: sec.path("tls.crt"), KeyFile: sec.path("tls.key"), ReloadInterval: 10 * time.Second},
		Logger: slog.New(slog.NewJSONHandler(&log, nil))}
	h, err := downstream.NewHTTP(downstream.WithClock(o, clk.Mono))
	require.NoError(t, err)

	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	_, peer := rec.last()
	assert.Equal(t, "meter-consumer-1", peer)

	certPEM, keyPEM = p.leaf(t, "meter-consumer-2", x509.ExtKeyUsageClientAuth)
	sec.update(map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	clk.Add(time.Minute)
	h.CloseIdle() // the pooled connection was made with the old one
	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	_, peer = rec.last()
	assert.Equal(t, "meter-consumer-2", peer)
	assert.Contains(t, log.String(), "downstream client certificate changed; read again")
	assert.NotContains(t, log.String(), "PRIVATE KEY")
}

func TestCustomCA(t *testing.T) {
	rec := &recorder{}
	srv := tlsServer(t, rec)
	p := newPKI(t)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	require.NoError(t, os.WriteFile(empty, []byte("# no certificate\n"), 0o600))

	tests := []struct {
		name    string
		ca      string
		wantErr string // from NewHTTP; "" builds, then wantOK says whether the POST succeeds
		wantOK  bool
	}{
		{"the server's CA", caOf(t, srv), "", true},
		{"another CA", p.CAFile, "", false},
		{"no CA: the system's roots", "", "", false},
		{"a file without a certificate", empty, "no PEM certificate", false},
		{"a missing file", filepath.Join(t.TempDir(), "none.pem"), "no such file", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second,
				Access: downstream.Access{CAFile: tt.ca}})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			err = h.Deliver(t.Context(), mustRead(t))
			if tt.wantOK {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestTLSOptionsRefused(t *testing.T) {
	tests := []struct {
		name string
		give downstream.HTTPOptions
		want string
	}{
		{"a certificate without its key", downstream.HTTPOptions{Access: downstream.Access{CertFile: "/c.pem"}}, "needs its key"},
		{"a key without its certificate", downstream.HTTPOptions{Access: downstream.Access{KeyFile: "/k.pem"}}, "needs its key"},
		{"a Client and TLS files", downstream.HTTPOptions{Client: &http.Client{}, Access: downstream.Access{CAFile: "/ca.pem"}}, "exclusive"},
		{"a token file without a reload interval", downstream.HTTPOptions{Access: downstream.Access{TokenFile: "/token"}}, "ReloadInterval"},
		{"a certificate without a reload interval", downstream.HTTPOptions{Access: downstream.Access{CertFile: "/c.pem", KeyFile: "/k.pem"}}, "ReloadInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.give.URL, tt.give.Timeout, tt.give.Classifier = "https://127.0.0.1/reads", time.Second, binaryClassifier
			_, err := downstream.NewHTTP(tt.give)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestStaticHeadersUserAgentAndTraceParent(t *testing.T) {
	rec := &recorder{}
	srv := tlsServer(t, rec)
	h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, Access: downstream.Access{
		CAFile: caOf(t, srv), Headers: map[string]string{"x-tenant": "north", "X-Region": "eu-west, eu-north"},
	}})
	require.NoError(t, err)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	tests := []struct {
		name string
		ctx  context.Context
		want string // traceparent received; "" for none
	}{
		{"a valid traceparent", downstream.WithTraceParent(t.Context(), tp), tp},
		{"trimmed", downstream.WithTraceParent(t.Context(), " "+tp+" "), tp},
		{"none", t.Context(), ""},
		{"invalid: dropped, delivered anyway", downstream.WithTraceParent(t.Context(), "00-xyz"), ""},
		{"invalid: all-zero trace id", downstream.WithTraceParent(t.Context(), "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, h.Deliver(tt.ctx, mustRead(t)))
			got, _ := rec.last()
			assert.Equal(t, tt.want, got.Get("Traceparent"))
			assert.Equal(t, []string{"north"}, got.Values("X-Tenant"), "canonicalised")
			assert.Equal(t, "eu-west, eu-north", got.Get("X-Region"), "a comma stays in the value")
			assert.Equal(t, "meter-consumer/"+version.Get().Version, got.Get("User-Agent"))
			assert.Equal(t, "application/json", got.Get("Content-Type"))
			assert.Equal(t, "MTR-1@2026-11-30T07:00:00Z", got.Get("Idempotency-Key"))
			assert.Empty(t, got.Get("Authorization"), "no token file")
		})
	}

	h, err = downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: 2 * time.Second, UserAgent: "billing-bridge/2",
		Access: downstream.Access{CAFile: caOf(t, srv)}})
	require.NoError(t, err)
	require.NoError(t, h.Deliver(t.Context(), mustRead(t)))
	got, _ := rec.last()
	assert.Equal(t, "billing-bridge/2", got.Get("User-Agent"))
}

func TestHeadersThatClashAreRefused(t *testing.T) {
	tests := []struct {
		name      string
		give      map[string]string
		withToken bool
		wantErr   string // "" when accepted
	}{
		{"a tenant", map[string]string{"X-Tenant": "north"}, false, ""},
		{"Authorization without a token file", map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, false, ""},
		{"Authorization with a token file", map[string]string{"authorization": "Basic Zm9vOmJhcg=="}, true, "header Authorization: is set by the sink itself from the token file"},
		{"Content-Type", map[string]string{"content-type": "text/plain"}, false, "header Content-Type: is set by the sink itself"},
		{"Idempotency-Key", map[string]string{"Idempotency-Key": "x"}, false, "Idempotency-Key"},
		{"Host", map[string]string{"HOST": "billing"}, false, "header Host"},
		{"Content-Length", map[string]string{"Content-Length": "3"}, false, "Content-Length"},
		{"Traceparent", map[string]string{"traceparent": "00-..."}, false, "Traceparent"},
		{"User-Agent", map[string]string{"User-Agent": "curl"}, false, "User-Agent"},
		{"Transfer-Encoding", map[string]string{"Transfer-Encoding": "chunked"}, false, "Transfer-Encoding"},
		{"a space in the name", map[string]string{"X Tenant": "north"}, false, `header name "X Tenant"`},
		{"an empty name", map[string]string{"": "north"}, false, `header name ""`},
		{"a new line in the value", map[string]string{"X-Tenant": "north\r\nX-Admin: yes"}, false, "control character"},
		{"the same name twice", map[string]string{"X-Tenant": "north", "x-tenant": "south"}, false, "header X-Tenant: given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := downstream.HTTPOptions{Classifier: binaryClassifier, URL: "http://127.0.0.1/reads", Timeout: time.Second, Access: downstream.Access{Headers: tt.give}}
			if tt.withToken {
				o.Access.TokenFile = filepath.Join(t.TempDir(), "token")
				o.Access.ReloadInterval = 10 * time.Second
				require.NoError(t, os.WriteFile(o.Access.TokenFile, []byte(tokOne), 0o600))
			}
			_, err := downstream.NewHTTP(o)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "Zm9vOmJhcg==", "a value may be a secret")
			assert.NotContains(t, err.Error(), "X-Admin")
		})
	}
}

// The rate engine's door stays shut to redirects with a TLS client too.
func TestRedirectsAreNotFollowedOverCustomTLS(t *testing.T) {
	var gets atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/reads", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/login", http.StatusFound) })
	mux.HandleFunc("/login", func(http.ResponseWriter, *http.Request) { gets.Add(1) })
	p := newPKI(t)
	srv := p.mtlsServer(t, mux)
	certPEM, keyPEM := p.leaf(t, "meter-consumer", x509.ExtKeyUsageClientAuth)
	sec := newSecret(t, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "token": []byte(tokOne)})
	h, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL + "/reads", Timeout: 2 * time.Second,
		Access: downstream.Access{CAFile: p.CAFile, CertFile: sec.path("tls.crt"), KeyFile: sec.path("tls.key"), TokenFile: sec.path("token"), ReloadInterval: 10 * time.Second}})
	require.NoError(t, err)
	err = h.Deliver(t.Context(), mustRead(t))
	var ce *classify.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, classify.CauseRedirect, ce.Cause)
	assert.Zero(t, gets.Load(), "the token never went to the redirect's target")
}

func ExampleWithTraceParent() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Header.Get("Traceparent"))
		fmt.Println(r.Header.Get("X-Tenant"))
	}))
	h, _ := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: srv.URL, Timeout: time.Second,
		Access: downstream.Access{Headers: map[string]string{"X-Tenant": "north"}}})
	// The traceparent header of the NATS message that carried the read.
	ctx := downstream.WithTraceParent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r, _ := meter.Decode([]byte(`{"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"0.1","unit":"m3"}`))
	fmt.Println(h.Deliver(ctx, r))
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// north
	// <nil>
}

func ExampleCheckHeader() {
	fmt.Println(downstream.CheckHeader("X-Tenant", "north", false))
	fmt.Println(downstream.CheckHeader("Idempotency-Key", "mine", false))
	err := downstream.CheckHeader("authorization", "Basic Zm9vOmJhcg==", true)
	fmt.Println(err, errors.Is(err, downstream.ErrReservedHeader))
	// Output:
	// <nil>
	// header Idempotency-Key: is set by the sink itself
	// header Authorization: is set by the sink itself from the token file true
}
