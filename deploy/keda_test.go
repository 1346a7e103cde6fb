package deploy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// trigger returns the ScaledObject's nats-jetstream trigger metadata.
func trigger(t *testing.T) map[string]string {
	t.Helper()
	m := load(t)
	require.Len(t, m.so.Spec.Triggers, 1)
	return m.so.Spec.Triggers[0].Metadata
}

// backlog creates the trigger's stream and durable on js, publishes 25 reads
// and takes 5 without acking them: 20 pending, 5 ack pending, lag 25.
func backlog(t *testing.T, js jetstream.JetStream, md map[string]string, replicas int) {
	t.Helper()
	ctx := t.Context()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: md["stream"], Subjects: []string{"meter.reads.>"}, Replicas: replicas})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, md["stream"], jetstream.ConsumerConfig{
		Durable: md["consumer"], AckPolicy: jetstream.AckExplicitPolicy, Replicas: replicas})
	require.NoError(t, err)
	for range 25 {
		_, err := js.Publish(ctx, "meter.reads.north", []byte(`{}`))
		require.NoError(t, err)
	}
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.Equal(t, 5, n)
}

// TestKEDAFindsTheDurableInOperatorMode: against a server in operator mode
// (the .creds the Deployment mounts), KEDA v2.20's scaler with account $G
// finds no account, and that is an error (before v2.20 it read as lag 0 and
// the fleet stayed at its minimum); a consumer it does not find is an error
// too (before, the stream's last sequence: the maximum). Errors count
// towards the ScaledObject's fallback. With the account's public key it
// finds the durable and its lag, 20 pending + 5 ack pending.
func TestKEDAFindsTheDurableInOperatorMode(t *testing.T) {
	t.Parallel()
	md := trigger(t)
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	require.NoError(t, err)
	opClaims, err := jwt.DecodeOperatorClaims(opJWT)
	require.NoError(t, err)
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	accClaims := jwt.NewAccountClaims(accPub)
	accClaims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := accClaims.Encode(op)
	require.NoError(t, err)
	sys, _ := nkeys.CreateAccount()
	sysPub, _ := sys.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	require.NoError(t, err)
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = accPub
	userJWT, err := uc.Encode(acc)
	require.NoError(t, err)
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	require.NoError(t, err)
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	require.NoError(t, os.WriteFile(credsFile, creds, 0o600))

	resolver := &server.MemAccResolver{}
	require.NoError(t, resolver.Store(accPub, accJWT))
	require.NoError(t, resolver.Store(sysPub, sysJWT))
	o := natstest.Options(t.TempDir())
	o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
	o.AccountResolver, o.SystemAccount = resolver, sysPub
	o.HTTPHost, o.HTTPPort = "127.0.0.1", -1 // the monitoring port, on a port the OS picks
	s := natstest.Start(t, o)
	nc, js := natstest.Connect(t, s, nats.UserCredentials(credsFile))
	backlog(t, js, md, 1)
	endpoint := s.MonitorAddr().String()

	// What `nats account info` shows as Account, with the consumer's creds.
	msg, err := nc.Request("$SYS.REQ.USER.INFO", nil, 5*time.Second)
	require.NoError(t, err)
	var info struct {
		Data struct {
			Account string `json:"account"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(msg.Data, &info))
	require.Equal(t, accPub, info.Data.Account, "the account is its public key")
	require.True(t, validAccount(info.Data.Account))

	tests := []struct {
		name     string
		account  string
		consumer string
		wantLag  int64
		wantErr  string
	}{
		{name: "the global account, what the manifest shipped two versions ago", account: "$G", consumer: md["consumer"],
			wantErr: `consumer "meter-consumer" not found in stream "METER_READS"`},
		{name: "the account's public key", account: info.Data.Account, consumer: md["consumer"], wantLag: 25},
		{name: "a consumer that does not exist", account: info.Data.Account, consumer: "meter-consumer-typo",
			wantErr: `consumer "meter-consumer-typo" not found in stream "METER_READS"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmd := maps.Clone(md)
			tmd["account"], tmd["consumer"] = tt.account, tt.consumer
			tmd["natsServerMonitoringEndpoint"] = endpoint
			meta, err := kedaParse(tmd)
			require.NoError(t, err)
			// The server's pending count can trail the stored messages for
			// a moment: poll until the answer settles, as KEDA would.
			var lag int64
			assert.Eventually(t, func() bool {
				lag, err = newKEDAScaler(meta, client).lag(t.Context())
				if tt.wantErr != "" {
					return err != nil && err.Error() == tt.wantErr
				}
				return err == nil && lag == tt.wantLag
			}, 5*time.Second, 20*time.Millisecond, "lag %d, error %v", &lag, &err)
		})
	}
}

// TestKEDAParsesTheTrigger: the base's trigger has no account, which KEDA
// v2.20 refuses to build a scaler for (so the ScaledObject is not ready
// and no HPA is made: the base does not scale without an overlay that sets
// the account); the example overlay's, rendered, has one; stream and
// consumer are required.
func TestKEDAParsesTheTrigger(t *testing.T) {
	t.Parallel()
	base := trigger(t)
	withAccount := maps.Clone(base)
	withAccount["account"] = "ADGGCEKZ6JJG6IYA5DAU7NRRDW73VHQZXFQGUCSFQCDVMFU6W6IJ2FU5"
	noConsumer := maps.Clone(withAccount)
	delete(noConsumer, "consumer")
	tests := []struct {
		name    string
		give    map[string]string
		wantErr string
		wantURL string
	}{
		{name: "the base, as shipped", give: base, wantErr: "no account name or id given"},
		{name: "an account set", give: withAccount,
			wantURL: "http://nats-headless.nats.svc.cluster.local:8222/jsz?acc=ADGGCEKZ6JJG6IYA5DAU7NRRDW73VHQZXFQGUCSFQCDVMFU6W6IJ2FU5&config=true&consumers=true"},
		{name: "no consumer", give: noConsumer, wantErr: `missing required parameter "consumer"`},
	}
	for _, tt := range tests {
		meta, err := kedaParse(tt.give)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.wantURL, meta.monitoringURL, tt.name)
		assert.Equal(t, int64(1000), meta.lagThreshold, tt.name)
	}
	so := renderedScaledObject(t, filepath.Join("overlays", "example"))
	_, err := kedaParse(so.Spec.Triggers[0].Metadata)
	assert.NoError(t, err, "the example overlay's trigger builds a scaler")
}

// TestKEDAFindsTheConsumerLeader: in a three-node cluster whose servers do
// not advertise client URLs (no_advertise), as a StatefulSet behind a
// headless service, KEDA v2.20 asks the endpoint's /jsz; seeing
// cluster_size 3 it reads the endpoint's /varz, takes each route URL's first
// label as a server's name, asks <name>.<the endpoint's host:port>/jsz in
// turn, and keeps the answer of the server that is the consumer's leader
// (its name equal to the consumer's cluster.leader); the next poll asks that
// server alone. So the route URLs must name the pods under the headless
// service, and the pods' server_name must be their name: a test DNS
// resolves only those names. A follower's numbers are not the leader's:
// with nats-server v2.15.2 a follower reports num_pending 0.
func TestKEDAFindsTheConsumerLeader(t *testing.T) {
	t.Parallel()
	md := trigger(t)
	md["account"] = "$G" // a server without accounts
	const headless = "nats-headless.nats.svc.cluster.local"
	nodes := make([]*server.Options, 3)
	var local, named []string
	for i := range nodes {
		o := natstest.Options(t.TempDir())
		o.ServerName = fmt.Sprintf("nats-%d", i)
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		o.Cluster = server.ClusterOpts{Name: "nats", Host: "127.0.0.1", Port: natstest.FreePort(t), NoAdvertise: true}
		local = append(local, fmt.Sprintf("nats://127.0.0.1:%d", o.Cluster.Port))
		named = append(named, fmt.Sprintf("nats://nats-%d.%s:6222", i, headless))
		nodes[i] = o
	}
	// nats-0, the one the endpoint answers for, lists its routes by name, as
	// a StatefulSet's configuration does (it cannot resolve them here: the
	// others dial it); the others list them by address.
	nodes[0].Routes = server.RoutesFromStr(strings.Join(named, ","))
	var servers []*server.Server
	for i, o := range nodes {
		if i > 0 {
			o.Routes = server.RoutesFromStr(strings.Join(local, ","))
		}
		servers = append(servers, natstest.Start(t, o))
	}
	_, js := natstest.Connect(t, servers[0])
	require.Eventually(t, func() bool {
		_, err := js.AccountInfo(t.Context())
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "JetStream cluster never came up")
	backlog(t, js, md, 3)

	names := map[string]string{headless + ":8222": servers[0].MonitorAddr().String()}
	for i, s := range servers {
		names[fmt.Sprintf("nats-%d.%s:8222", i, headless)] = s.MonitorAddr().String()
	}
	md["natsServerMonitoringEndpoint"] = headless + ":8222"
	meta, err := kedaParse(md)
	require.NoError(t, err)
	var (
		scaler *kedaScaler
		lag    int64
		asked  []string
	)
	require.Eventually(t, func() bool {
		scaler = newKEDAScaler(meta, resolving(names))
		lag, err = scaler.lag(t.Context())
		asked = scaler.takeAsked()
		return err == nil && lag == 25
	}, 10*time.Second, 100*time.Millisecond, "the leader's lag, 20 pending + 5 ack pending: lag %d, error %v, asked %v", &lag, &err, &asked)

	query := "?acc=%24G&config=true&consumers=true"
	leader := scaler.leader
	require.Regexp(t, `^nats-[012]$`, leader)
	want := []string{"http://" + headless + ":8222/jsz" + query, "http://" + headless + ":8222/varz"}
	for i := range servers {
		name := fmt.Sprintf("nats-%d", i)
		want = append(want, "http://"+name+"."+headless+":8222/jsz"+query)
		if name == leader {
			break
		}
	}
	assert.Equal(t, want, asked, "the endpoint, its /varz, then each server by name up to the leader (%s)", leader)

	// The next poll asks the leader alone, by the name it was found at.
	lag, err = scaler.lag(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(25), lag)
	assert.Equal(t, []string{"http://" + leader + "." + headless + ":8222/jsz" + query}, scaler.takeAsked())

	// A follower's own answer: only its ack pending (once it has caught up
	// with the leader's).
	for i, s := range servers {
		if fmt.Sprintf("nats-%d", i) == leader {
			continue
		}
		fmd := maps.Clone(md)
		fmd["natsServerMonitoringEndpoint"] = s.MonitorAddr().String()
		fmeta, err := kedaParse(fmd)
		require.NoError(t, err)
		var got string
		assert.Eventually(t, func() bool {
			var r jsz
			f := newKEDAScaler(fmeta, client)
			if f.get(t.Context(), fmeta.monitoringURL, &r) != nil || !f.set(r, "") {
				return false
			}
			c := f.stream.Consumers[0]
			got = fmt.Sprintf("leader %s, pending %d, ack pending %d", c.Cluster.Leader, c.NumPending, c.NumAckPending)
			return c.Cluster.Leader == leader && c.NumPending == 0 && c.NumAckPending == 5
		}, 10*time.Second, 50*time.Millisecond, "nats-%d, a follower, names the leader and reports only the ack pending: %s", i, &got)
	}

	// A DNS without the pods' names (the endpoint a client Service, the
	// StatefulSet without its headless service): KEDA cannot reach the
	// servers it builds names for, an error, and the ScaledObject falls back.
	_, err = newKEDAScaler(meta, resolving(map[string]string{headless + ":8222": names[headless+":8222"]})).lag(t.Context())
	assert.ErrorContains(t, err, "no such host")
}

// renderedScaledObject renders dir and returns its one ScaledObject.
func renderedScaledObject(t *testing.T, dir string) scaledObject {
	t.Helper()
	kinds := kustomize(t, dir)
	require.Len(t, kinds["ScaledObject"], 1)
	var so scaledObject
	require.NoError(t, k8syaml.UnmarshalStrict([]byte(kinds["ScaledObject"][0]), &so))
	require.Len(t, so.Spec.Triggers, 1)
	return so
}

// TestKEDAFindsTheLeaderByAdvertisedURLs: servers that advertise client
// URLs (client_advertise: a pod's name under the headless service) take
// KEDA v2.20's other path: each connect_urls host, on the endpoint's port,
// is asked for its /varz (its server_name) and its /jsz, until the
// consumer's leader; the next poll asks the leader alone.
func TestKEDAFindsTheLeaderByAdvertisedURLs(t *testing.T) {
	t.Parallel()
	md := trigger(t)
	md["account"] = "$G"
	const headless = "nats-headless.nats.svc.cluster.local"
	nodes := make([]*server.Options, 3)
	var routes []string
	for i := range nodes {
		o := natstest.Options(t.TempDir())
		o.ServerName = fmt.Sprintf("nats-%d", i)
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		o.ClientAdvertise = fmt.Sprintf("nats-%d.%s:4222", i, headless)
		o.Cluster = server.ClusterOpts{Name: "nats", Host: "127.0.0.1", Port: natstest.FreePort(t)}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.Cluster.Port))
		nodes[i] = o
	}
	var servers []*server.Server
	for _, o := range nodes {
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		servers = append(servers, natstest.Start(t, o))
	}
	_, js := natstest.Connect(t, servers[0])
	require.Eventually(t, func() bool {
		_, err := js.AccountInfo(t.Context())
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "JetStream cluster never came up")
	backlog(t, js, md, 3)

	names := map[string]string{headless + ":8222": servers[0].MonitorAddr().String()}
	hosts := map[string]bool{headless + ":8222": true}
	for i, s := range servers {
		h := fmt.Sprintf("nats-%d.%s:8222", i, headless)
		names[h], hosts[h] = s.MonitorAddr().String(), true
	}
	md["natsServerMonitoringEndpoint"] = headless + ":8222"
	meta, err := kedaParse(md)
	require.NoError(t, err)
	var (
		scaler *kedaScaler
		lag    int64
		asked  []string
	)
	require.Eventually(t, func() bool {
		scaler = newKEDAScaler(meta, resolving(names))
		lag, err = scaler.lag(t.Context())
		asked = scaler.takeAsked()
		return err == nil && lag == 25
	}, 10*time.Second, 100*time.Millisecond, "the leader's lag: lag %d, error %v, asked %v", &lag, &err, &asked)

	query := "?acc=%24G&config=true&consumers=true"
	leaderURL := "http://" + scaler.leader + "." + headless + ":8222/jsz" + query
	t.Logf("leader %s, asked %v", scaler.leader, asked)
	require.GreaterOrEqual(t, len(asked), 4, "%v", asked)
	assert.Equal(t, []string{"http://" + headless + ":8222/jsz" + query, "http://" + headless + ":8222/varz"}, asked[:2])
	for i := 2; i+1 < len(asked); i += 2 {
		u, err := url.Parse(asked[i])
		require.NoError(t, err)
		assert.True(t, hosts[u.Host], "%s: a host KEDA builds from connect_urls", asked[i])
		assert.Equal(t, "/varz", u.Path, "a server's name first")
		assert.Equal(t, "http://"+u.Host+"/jsz"+query, asked[i+1], "then its /jsz")
	}
	assert.Equal(t, leaderURL, asked[len(asked)-1], "the last asked is the leader")

	lag, err = scaler.lag(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(25), lag)
	assert.Equal(t, []string{leaderURL}, scaler.takeAsked(), "the next poll asks the leader alone")
}
