package downstream_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

// pki is a test CA that signs a server certificate for 127.0.0.1 and client
// certificates, all as PEM files.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAFile string
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), serial: 1}
	var err error
	p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rate engine test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	require.NoError(t, err)
	p.ca, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.CAFile = writePEM(t, filepath.Join(p.dir, "ca.pem"), "CERTIFICATE", der)
	return p
}

// leaf returns the PEM of a certificate for name signed by the CA, and its key.
func (p *pki) leaf(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	p.serial++
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// mtlsServer starts an HTTPS server with a certificate from p that requires
// a client certificate from p, and runs h.
func (p *pki) mtlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := p.leaf(t, "rate-engine", x509.ExtKeyUsageServerAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// tlsServer starts an HTTPS server with httptest's own certificate; it is
// closed when the test ends.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func writePEM(t *testing.T, path, typ string, der []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// caOf writes the certificate of an httptest TLS server to a PEM file, to be
// given as the custom CA.
func caOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writePEM(t, filepath.Join(t.TempDir(), "ca.pem"), "CERTIFICATE", srv.Certificate().Raw)
}

// secret is a directory laid out as the kubelet mounts a Kubernetes secret:
// every file is a symlink through ..data to a timestamped directory, and an
// update swaps ..data atomically (a rename of a new symlink over it).
type secret struct {
	t   *testing.T
	dir string
	n   int
}

func newSecret(t *testing.T, files map[string][]byte) *secret {
	t.Helper()
	s := &secret{t: t, dir: t.TempDir()}
	s.update(files)
	for name := range files {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, name)))
	}
	return s
}

func (s *secret) path(name string) string { return filepath.Join(s.dir, name) }

// update writes files into a new timestamped directory and swaps ..data to
// it; a file left out is gone from the secret.
func (s *secret) update(files map[string][]byte) {
	s.t.Helper()
	s.n++
	ts := fmt.Sprintf("..2026_11_30_07_00_%02d.%d", s.n, s.n)
	require.NoError(s.t, os.Mkdir(filepath.Join(s.dir, ts), 0o755))
	for name, b := range files {
		require.NoError(s.t, os.WriteFile(filepath.Join(s.dir, ts, name), b, 0o600))
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	require.NoError(s.t, os.Symlink(ts, tmp))
	require.NoError(s.t, os.Rename(tmp, filepath.Join(s.dir, "..data")))
}

// clock is a settable clock for the reload checks.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Mono is the time since the clock's start.
func (c *clock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier, _ = config.Default().Downstream.Classifier()
