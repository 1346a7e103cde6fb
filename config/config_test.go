package config_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	sink "github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// valid returns Default with a downstream URL: the smallest valid Config.
func valid() config.Config {
	cfg := config.Default()
	cfg.Downstream.URL = "http://127.0.0.1:9090/reads"
	return cfg
}

func TestDefault(t *testing.T) {
	cfg := config.Default()
	assert.Equal(t, "METER_READS", cfg.Stream.Name)
	assert.Equal(t, []string{"meter.reads.>"}, cfg.Stream.Subjects)
	assert.Equal(t, 32, cfg.Consumer.Concurrency)
	assert.Equal(t, 30*time.Second, cfg.Consumer.AckWait)
	assert.Equal(t, []int{400, 404, 405, 410, 413, 414, 415, 422}, cfg.Downstream.PermanentStatuses)
	assert.Empty(t, cfg.Downstream.URL)
	require.ErrorContains(t, cfg.Validate(), "downstream.url")
}

func TestDefaultWithDownstreamValidates(t *testing.T) {
	require.NoError(t, valid().Validate())
}

func TestDefaultDemoValidates(t *testing.T) {
	cfg := config.Default()
	cfg.Demo = true
	require.NoError(t, cfg.Validate())
}

func TestDefaultDoesNotShareSlices(t *testing.T) {
	a := config.Default()
	a.Stream.Subjects[0] = "changed"
	a.Downstream.PermanentStatuses[0] = 499
	b := config.Default()
	assert.Equal(t, "meter.reads.>", b.Stream.Subjects[0])
	assert.Equal(t, 400, b.Downstream.PermanentStatuses[0])
}

func TestRetryPolicy(t *testing.T) {
	cfg := config.Default()
	want := retry.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, MaxAttempts: 6, MaxServerWait: 5 * time.Minute}
	assert.Equal(t, want, cfg.Retry.Policy())
	require.NoError(t, cfg.Retry.Policy().Validate())
}

const downstreamToken = "tok-from-file-5ecret"

// doorFiles writes a token file, a self-signed certificate with its key
// and an empty file into a temporary directory.
type doorFiles struct{ token, cert, key, empty, missing string }

func newDoorFiles(t *testing.T) doorFiles {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "meter-consumer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	return doorFiles{
		token:   write("token", []byte(downstreamToken+"\n")),
		cert:    write("tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		key:     write("tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
		empty:   write("empty", nil),
		missing: filepath.Join(dir, "missing"),
	}
}

func TestValidateDownstreamAccess(t *testing.T) {
	f := newDoorFiles(t)
	tests := []struct {
		name   string
		mutate func(*config.Downstream)
		want   string // the whole error, or the start of it; "" when valid
	}{
		{"token file, client certificate, CA", func(d *config.Downstream) {
			d.TokenFile, d.TLS = f.token, config.TLS{CA: f.cert, Cert: f.cert, Key: f.key}
		}, ""},
		{"headers", func(d *config.Downstream) { d.Headers = map[string]string{"X-Tenant": "north", "X-Api-Key": "k"} }, ""},
		{"Authorization without a token file", func(d *config.Downstream) { d.Headers = map[string]string{"Authorization": "Basic x"} }, ""},
		{"missing token file", func(d *config.Downstream) { d.TokenFile = f.missing },
			fmt.Sprintf(`downstream.token_file (%q): read token: open %s: no such file or directory`, f.missing, f.missing)},
		{"empty token file", func(d *config.Downstream) { d.TokenFile = f.empty },
			fmt.Sprintf(`downstream.token_file (%q): token file %s: holds no token`, f.empty, f.empty)},
		{"a CA without a certificate", func(d *config.Downstream) { d.TLS.CA = f.token },
			fmt.Sprintf(`downstream.tls.ca (%q): CA file %s: no PEM certificate in it`, f.token, f.token)},
		{"a certificate without its key", func(d *config.Downstream) { d.TLS.Cert = f.cert },
			fmt.Sprintf(`downstream.tls.cert (%q) is set but downstream.tls.key is empty`, f.cert)},
		{"a key without its certificate", func(d *config.Downstream) { d.TLS.Key = f.key },
			fmt.Sprintf(`downstream.tls.key (%q) is set but downstream.tls.cert is empty`, f.key)},
		{"a key that is not one", func(d *config.Downstream) { d.TLS.Cert, d.TLS.Key = f.cert, f.cert },
			fmt.Sprintf(`downstream.tls.cert (%q) and downstream.tls.key (%q): client certificate`, f.cert, f.cert)},
		{"zero reload interval", func(d *config.Downstream) { d.ReloadInterval = 0 }, "downstream.reload_interval (0s) must be > 0"},
		{"a header the sink sets", func(d *config.Downstream) { d.Headers = map[string]string{"idempotency-key": "x"} },
			`downstream.headers["idempotency-key"]: header Idempotency-Key: is set by the sink itself`},
		{"Authorization with a token file", func(d *config.Downstream) {
			d.TokenFile, d.Headers = f.token, map[string]string{"Authorization": "Basic x"}
		}, `downstream.headers["Authorization"]: header Authorization: is set by the sink itself from the token file`},
		{"a bad header name", func(d *config.Downstream) { d.Headers = map[string]string{"X Tenant": "north"} }, `downstream.headers["X Tenant"]: header name "X Tenant"`},
		{"one header twice", func(d *config.Downstream) { d.Headers = map[string]string{"X-Tenant": "north", "x-tenant": "south"} },
			`downstream.headers["X-Tenant"] and downstream.headers["x-tenant"] name the same header: give it once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mutate(&cfg.Downstream)
			err := cfg.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, config.ErrInvalid)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, 1, "one problem, one line: %v", err)
			assert.True(t, strings.HasPrefix(lines[0], tt.want), "got  %s\nwant %s...", lines[0], tt.want)
			assert.NotContains(t, err.Error(), downstreamToken)
		})
	}
}

// The dead-letter tools post nothing: they do not read the downstream's
// files (an operator's shell may not be able to), and still check the rest.
func TestToolsDoNotReadTheDownstreamFiles(t *testing.T) {
	f := newDoorFiles(t)
	env := env(map[string]string{"CONSUMER_DOWNSTREAM_TOKEN_FILE": f.missing, "CONSUMER_DOWNSTREAM_CA": f.missing})
	_, err := config.Load([]string{"--demo"}, env)
	require.ErrorContains(t, err, "downstream.token_file")
	require.ErrorContains(t, err, "downstream.tls.ca")

	cfg, _, err := config.LoadTool(flag.NewFlagSet("consumer dlq list", flag.ContinueOnError), nil, env)
	require.NoError(t, err)
	assert.Equal(t, f.missing, cfg.Downstream.TokenFile)
}

func TestLoadDownstreamHeaders(t *testing.T) {
	file := writeFile(t, "downstream:\n  headers:\n    X-Tenant: north\n    X-Count: 5\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want map[string]string
	}{
		{"none", nil, nil, nil},
		{"yaml mapping", []string{"--config", file}, nil, map[string]string{"X-Tenant": "north", "X-Count": "5"}},
		{"one a line in the environment", nil, map[string]string{"CONSUMER_DOWNSTREAM_HEADERS": "X-Tenant: south\n\nX-Region: eu-west, eu-north\n"},
			map[string]string{"X-Tenant": "south", "X-Region": "eu-west, eu-north"}},
		{"the environment replaces the file", []string{"--config", file}, map[string]string{"CONSUMER_DOWNSTREAM_HEADERS": "X-Region: eu"},
			map[string]string{"X-Region": "eu"}},
		{"a repeated flag", []string{"--downstream-headers", "X-Tenant: east", "--downstream-headers=X-Url: https://a/b?c=d"}, nil,
			map[string]string{"X-Tenant": "east", "X-Url": "https://a/b?c=d"}},
		{"flags replace the environment", []string{"--downstream-headers", "X-A: 1"}, map[string]string{"CONSUMER_DOWNSTREAM_HEADERS": "X-B: 2"},
			map[string]string{"X-A": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(append([]string{"--demo"}, tt.args...), env(tt.env))
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Downstream.Headers)
			assert.Equal(t, tt.want, cfg.Downstream.Access().Headers)
		})
	}
}

func TestLoadDownstreamHeadersErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no colon in the environment", nil, map[string]string{"CONSUMER_DOWNSTREAM_HEADERS": "X-Api-Key " + downstreamToken},
			`environment CONSUMER_DOWNSTREAM_HEADERS=REDACTED: want "Name: value" headers`},
		{"twice in the environment", nil, map[string]string{"CONSUMER_DOWNSTREAM_HEADERS": "X-A: 1\nx-a: 2"}, `header "x-a" given twice`},
		{"twice in flags", []string{"--downstream-headers", "X-A: 1", "--downstream-headers", "X-a: 2"}, nil, `header "X-a" given twice`},
		{"no name", []string{"--downstream-headers", ": 1"}, nil, `want "Name: value" headers`},
		{"reserved", []string{"--downstream-headers", "Host: billing"}, nil, `downstream.headers["Host"]: header Host: is set by the sink itself`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(append([]string{"--demo"}, tt.args...), env(tt.env))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), downstreamToken)
		})
	}
}

func TestLoadDownstreamAccess(t *testing.T) {
	f := newDoorFiles(t)
	cfg, err := config.Load([]string{"--downstream-url", "https://billing/reads", "--downstream-token-file", f.token,
		"--downstream-cert", f.cert, "--downstream-key", f.key, "--downstream-reload-interval", "30s"},
		env(map[string]string{"CONSUMER_DOWNSTREAM_CA": f.cert}))
	require.NoError(t, err)
	assert.Equal(t, sink.Access{TokenFile: f.token, ReloadInterval: 30 * time.Second, CAFile: f.cert, CertFile: f.cert, KeyFile: f.key},
		cfg.Downstream.Access())
	assert.Equal(t, 10*time.Second, config.Default().Downstream.ReloadInterval)
	assert.Equal(t, 10*time.Second, valid().Downstream.Access().ReloadInterval)
}

func TestSensitiveHeadersNeverLogged(t *testing.T) {
	cfg := valid()
	cfg.Downstream.Headers = map[string]string{
		"X-Tenant": "north", "X-Api-Key": "key-5ecret", "Authorization": "Basic 5ecret", "X-Session-Token": "5ecret-s",
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", cfg)
	var rec struct {
		Config struct {
			Downstream map[string]any `json:"downstream"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, map[string]any{"X-Tenant": "north", "X-Api-Key": "REDACTED", "Authorization": "REDACTED", "X-Session-Token": "REDACTED"},
		rec.Config.Downstream["headers"])
	assert.Equal(t, map[string]any{"ca": "", "cert": "", "key": ""}, rec.Config.Downstream["tls"])
	assert.Equal(t, "10s", rec.Config.Downstream["reload_interval"])
	for _, s := range []string{buf.String(), fmt.Sprint(cfg), fmt.Sprintf("%#v", cfg)} {
		assert.NotContains(t, s, "5ecret")
	}
	assert.Equal(t, "key-5ecret", cfg.Downstream.Headers["X-Api-Key"], "the original is unchanged")
}

// What the service's sink needs from the configuration is one field:
// downstream.HTTPOptions{..., Access: cfg.Downstream.Access()}. Loaded from
// flags, the environment and a file, it opens a rate engine that wants a
// client certificate, a bearer token and a tenant header.
func TestAccessOpensTheRateEngine(t *testing.T) {
	f := newDoorFiles(t)
	clientPEM, err := os.ReadFile(f.cert)
	require.NoError(t, err)
	block, _ := pem.Decode(clientPEM)
	clientCert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)

	var got http.Header
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if len(r.TLS.PeerCertificates) == 0 || r.Header.Get("Authorization") != "Bearer "+downstreamToken {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	pool := x509.NewCertPool()
	pool.AddCert(clientCert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	file := writeFile(t, "downstream:\n  headers:\n    X-Tenant: north\n  tls:\n    ca: "+ca+"\n")

	cfg, err := config.Load([]string{"--config", file, "--downstream-url", srv.URL + "/reads", "--downstream-token-file", f.token},
		env(map[string]string{"CONSUMER_DOWNSTREAM_CERT": f.cert, "CONSUMER_DOWNSTREAM_KEY": f.key}))
	require.NoError(t, err)
	cls, err := cfg.Downstream.Classifier()
	require.NoError(t, err)
	h, err := sink.NewHTTP(sink.HTTPOptions{URL: cfg.Downstream.URL, Timeout: cfg.Downstream.Timeout, Classifier: cls, Access: cfg.Downstream.Access()})
	require.NoError(t, err)
	r, err := meter.Decode([]byte(`{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`))
	require.NoError(t, err)
	require.NoError(t, h.Deliver(t.Context(), r))
	assert.Equal(t, "north", got.Get("X-Tenant"))
}
