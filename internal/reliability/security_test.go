package reliability_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		kder, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := pki{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// mutualTLS makes a server require mutual TLS with p's certificates.
func mutualTLS(t *testing.T, p pki) func(*server.Options) {
	return func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.serverCert, KeyFile: p.serverKey, CaFile: p.ca, Verify: true})
		require.NoError(t, err)
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, true, 2
	}
}

func TestSecureConnections(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	const password, token = "correct-horse-battery-staple", "tok-9f8e7d6c5b4a"
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))

	tests := []struct {
		name   string
		auth   func(*server.Options)
		client []nats.Option
		env    []string
		args   []string
		secret string
	}{
		{
			name:   "user and password over mutual TLS",
			auth:   func(o *server.Options) { o.Users = []*server.User{{Username: "alice", Password: password}} },
			client: []nats.Option{nats.UserInfo("alice", password)},
			env:    []string{"NATS_USER=alice", "NATS_PASSWORD=" + password},
			secret: password,
		},
		{
			name:   "token over mutual TLS",
			auth:   func(o *server.Options) { o.Authorization = token },
			client: []nats.Option{nats.Token(token)},
			env:    []string{"NATS_TOKEN=" + token},
			secret: token,
		},
		{
			name:   "nkey over mutual TLS",
			auth:   func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			client: []nats.Option{nkeyOption(t, seedFile)},
			args:   []string{"--nats-nkey", seedFile},
			secret: string(seed),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScenario(t, setup{tls: &p, server: tt.auth, client: tt.client, env: tt.env, args: tt.args})
			s.publish("SEC", 10, 0)
			s.settled(30 * time.Second)
			s.checkLedger(nil, 0)
			assert.NotContains(t, s.consumer.Output(), tt.secret, "a secret reached the log")
		})
	}

	t.Run("a wrong password is said at once, by name, without showing it", func(t *testing.T) {
		r := natstest.RunRestartable(t, mutualTLS(t, p), func(o *server.Options) {
			o.Users = []*server.User{{Username: "alice", Password: password}}
		})
		c := proctest.Start(t, "consumer", binary, []string{"NATS_USER=alice", "NATS_PASSWORD=wrong-" + password},
			"--nats-url", "tls://"+r.Addr(), "--downstream-url", "http://127.0.0.1:1/reads",
			"--nats-ca", p.ca, "--nats-cert", p.clientCert, "--nats-key", p.clientKey, "--log-format", "json")
		var l map[string]any
		require.Eventually(t, func() bool {
			for _, r := range c.Records("connecting to NATS") { // a slow machine may time out an attempt first
				if r["level"] == "ERROR" {
					l = r
					return true
				}
			}
			return false
		}, 10*time.Second, 10*time.Millisecond, "a refusal is an error, not a blip")
		assert.Contains(t, strings.ToLower(fmt.Sprint(l["error"])), "authorization")
		assert.Contains(t, fmt.Sprint(l["error"]), "NATS refused the connection")
		assert.NotContains(t, c.Output(), password)
		code, _ := c.Term(10 * time.Second)
		assert.Zero(t, code, "stopped while it waits: a clean stop")
	})
}

func nkeyOption(t *testing.T, seedFile string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seedFile)
	require.NoError(t, err)
	return o
}
