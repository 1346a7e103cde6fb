package reliability_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCredentialsFile runs the consumer with a .creds file (a user JWT and
// its seed) against a server in operator mode, over mutual TLS.
func TestCredentialsFile(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opPub, _ := op.PublicKey()
	opClaims := jwt.NewOperatorClaims(opPub)
	opJWT, err := opClaims.Encode(op)
	require.NoError(t, err)
	opClaims, err = jwt.DecodeOperatorClaims(opJWT)
	require.NoError(t, err)

	acc, err := nkeys.CreateAccount()
	require.NoError(t, err)
	accPub, _ := acc.PublicKey()
	accClaims := jwt.NewAccountClaims(accPub)
	accClaims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := accClaims.Encode(op)
	require.NoError(t, err)

	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	userPub, _ := user.PublicKey()
	userClaims := jwt.NewUserClaims(userPub)
	userClaims.IssuerAccount = accPub
	userJWT, err := userClaims.Encode(acc)
	require.NoError(t, err)
	userSeed, err := user.Seed()
	require.NoError(t, err)
	creds, err := jwt.FormatUserConfig(userJWT, userSeed)
	require.NoError(t, err)
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	require.NoError(t, os.WriteFile(credsFile, creds, 0o600))

	sys, err := nkeys.CreateAccount()
	require.NoError(t, err)
	sysPub, _ := sys.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	require.NoError(t, err)

	resolver := &server.MemAccResolver{}
	require.NoError(t, resolver.Store(accPub, accJWT))
	require.NoError(t, resolver.Store(sysPub, sysJWT))
	s := newScenario(t, setup{tls: &p, server: func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	}, client: []nats.Option{nats.UserCredentials(credsFile)}, args: []string{"--nats-creds", credsFile}})
	s.publish("CRD", 10, 0)
	s.settled(30 * time.Second)
	s.checkLedger(nil, 0)
	assert.NotContains(t, s.consumer.Output(), string(userSeed), "the seed reached the log")
	assert.NotContains(t, s.consumer.Output(), userJWT, "the user JWT reached the log")
}
