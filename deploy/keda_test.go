package deploy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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

	"github.com/meterline/meter-consumer/internal/natstest"
)

// jsz is what KEDA's nats-jetstream scaler decodes from /jsz
// (kedacore/keda pkg/scalers/nats_jetstream_scaler.go, jetStreamEndpointResponse
// and the types under it): the same JSON names, only the fields it reads.
type jsz struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				LastSequence int64 `json:"last_seq"`
			} `json:"state"`
			Consumers []struct {
				Name          string `json:"name"`
				NumAckPending int    `json:"num_ack_pending"`
				NumPending    int    `json:"num_pending"`
				Cluster       struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
	MetaCluster struct {
		ClusterSize int `json:"cluster_size"`
	} `json:"meta_cluster"`
}

// kedaURL is the scaler's getNATSJetStreamMonitoringURL with useHttps false:
// the account goes in as written, unescaped.
func kedaURL(endpoint, account string) string {
	return fmt.Sprintf("http://%s/jsz?acc=%s&consumers=true&config=true", endpoint, account)
}

// kedaLag is the lag the scaler reports (setNATSJetStreamMonitoringData,
// then getMaxMsgLag): num_pending + num_ack_pending of the consumer; the
// stream's last sequence when the stream is found without the consumer; 0
// when not even the stream is found (it keeps an empty stream detail, and
// the fleet stays at minReplicaCount). leader is the consumer's leader.
func kedaLag(r jsz, account, stream, consumer string) (lag int64, found bool, leader string) {
	for _, a := range r.Accounts {
		if a.Name != account {
			continue
		}
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			for _, c := range s.Consumers {
				if c.Name == consumer {
					return int64(c.NumPending + c.NumAckPending), true, c.Cluster.Leader
				}
			}
			return s.State.LastSequence, false, ""
		}
	}
	return 0, false, ""
}

// getJSON decodes the JSON answer to a GET of url into out. It returns its
// error rather than failing the test: it runs inside Eventually's condition.
func getJSON(url string, out any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

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
// (the .creds the Deployment mounts), KEDA's query with account $G finds no
// account and reports lag 0, so the fleet would stay at its minimum; with the
// account's public key it finds the durable and its lag.
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
		account string
		wantLag int64
		found   bool
	}{
		{account: "$G", wantLag: 0, found: false}, // what the manifest shipped before: scales on 0
		{account: info.Data.Account, wantLag: 25, found: true},
	}
	for _, tt := range tests {
		// The server's pending count can trail the stored messages for a
		// moment: ask until the answer settles.
		var r jsz
		var lag int64
		var found bool
		assert.Eventually(t, func() bool {
			r = jsz{}
			if getJSON(kedaURL(endpoint, tt.account), &r) != nil {
				return false
			}
			lag, found, _ = kedaLag(r, tt.account, md["stream"], md["consumer"])
			return found == tt.found && lag == tt.wantLag
		}, 5*time.Second, 20*time.Millisecond, "account %s: found %v, lag %d", tt.account, &found, &lag)
		assert.Zero(t, r.MetaCluster.ClusterSize, "standalone: the scaler asks no other server")
	}
}

// TestKEDAFindsTheConsumerLeader: in a three-node cluster every server's
// /jsz lists the durable, followers included, with the name of its leader;
// the scaler (cluster_size > 1) asks each server in turn and keeps the
// answer of the one whose /varz server_name is that leader. It reaches each
// server by its own name, which is why the endpoint must be the StatefulSet's
// headless service (docs/OPERATIONS.md, "Scaling"). A follower's numbers are
// not the leader's: with nats-server v2.15.2 a follower reports num_pending 0,
// so its lag is the ack pending alone.
func TestKEDAFindsTheConsumerLeader(t *testing.T) {
	t.Parallel()
	md := trigger(t)
	nodes := make([]*server.Options, 3)
	var routes []string
	for i := range nodes {
		o := natstest.Options(t.TempDir())
		o.ServerName = fmt.Sprintf("nats-%d", i)
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		o.Cluster = server.ClusterOpts{Name: "nats", Host: "127.0.0.1", Port: freePortInt(t)}
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

	type answer struct {
		lag          int64
		found        bool
		leader, name string
		size         int
	}
	var got []answer
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, s := range servers {
			var v struct {
				ServerName string `json:"server_name"`
			}
			var r jsz
			if getJSON("http://"+s.MonitorAddr().String()+"/varz", &v) != nil ||
				getJSON(kedaURL(s.MonitorAddr().String(), "$G"), &r) != nil {
				return false
			}
			a := answer{name: v.ServerName, size: r.MetaCluster.ClusterSize}
			a.lag, a.found, a.leader = kedaLag(r, "$G", md["stream"], md["consumer"])
			got = append(got, a)
		}
		for _, a := range got {
			want := int64(5) // a follower
			if a.leader == a.name {
				want = 25
			}
			if !a.found || a.leader == "" || a.size != 3 || a.lag != want {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "every server lists the durable with its leader, the leader lag 25, the followers 5: %+v", &got)
	leaders := 0
	for _, a := range got {
		assert.Equal(t, got[0].leader, a.leader, "the servers agree on the leader")
		if a.name == a.leader {
			leaders++
			assert.Equal(t, int64(25), a.lag, "the leader: 20 pending + 5 ack pending")
		} else {
			assert.Equal(t, int64(5), a.lag, "%s, a follower: num_pending 0, only the ack pending", a.name)
		}
	}
	assert.Equal(t, 1, leaders, "one server is the leader: %+v", got)
}

func freePortInt(t *testing.T) int {
	t.Helper()
	var p int
	_, err := fmt.Sscan(freePort(t), &p)
	require.NoError(t, err)
	return p
}
