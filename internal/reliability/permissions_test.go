package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
)

// The NATS permissions are defined once, in permissionsConf, a nats-server
// configuration; usersScript, the nsc commands of operator mode, is
// generated from it (deploy/nats/nscusers). The tests below run with the
// configuration and check the script grants the same; operationsDoc's
// section NATS permissions says why each permission is there.
const (
	permissionsConf = "../../deploy/nats/permissions.conf"
	usersScript     = "../../deploy/nats/users.sh"
	operationsDoc   = "../../docs/OPERATIONS.md"
)

// The users the document defines, and the account they share.
const (
	account     = "METERING"
	serviceUser = "meter-consumer"
	provisioner = "meter-provisioner"
	dlqReader   = "meter-dlq-reader"
	dlqOperator = "meter-dlq-operator"
	auditUser   = "meter-audit"
	// admin is the test's own user (all permissions, same account): it
	// publishes reads as a head-end would and inspects the streams. It is
	// added in Go, never part of a document.
	admin = "test-admin"
)

// passwords are what the document's $VARIABLES resolve to: defined in the
// test's own settings, ahead of the document's block, where a deployment
// has them in nats-server's environment.
var passwords = map[string]string{
	serviceUser: "svc-pw", provisioner: "prov-pw", dlqReader: "reader-pw", dlqOperator: "operator-pw", auditUser: "audit-pw", admin: "admin-pw",
}

var passwordVars = map[string]string{
	"METER_CONSUMER_PASSWORD":     serviceUser,
	"METER_PROVISIONER_PASSWORD":  provisioner,
	"METER_DLQ_READER_PASSWORD":   dlqReader,
	"METER_DLQ_OPERATOR_PASSWORD": dlqOperator,
	"METER_AUDIT_PASSWORD":        auditUser,
}

// parseConf writes the permissions file's contents after the test's own
// settings into a configuration file and parses it as nats-server does.
func parseConf(t *testing.T, block, storeDir string) *server.Options {
	t.Helper()
	var vars strings.Builder
	for _, v := range slices.Sorted(maps.Keys(passwordVars)) {
		if !strings.Contains(block, "$"+v) {
			continue // a variable the block does not use is an unknown field
		}
		fmt.Fprintf(&vars, "%s: %q\n", v, passwords[passwordVars[v]])
	}
	conf := fmt.Sprintf("# the test's own settings\n%slisten: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n\n# from deploy/nats/permissions.conf\n%s", vars.String(), storeDir, block)
	path := filepath.Join(t.TempDir(), "nats-server.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err, "deploy/nats/permissions.conf does not parse:\n%s", conf)
	return opts
}

// documentedOptions returns the server options of the permissions file:
// the account and every user of the fleet.
func documentedOptions(t *testing.T) *server.Options {
	t.Helper()
	conf, err := os.ReadFile(permissionsConf)
	require.NoError(t, err)
	opts := parseConf(t, string(conf), t.TempDir())
	require.True(t, slices.ContainsFunc(opts.Accounts, func(a *server.Account) bool { return a.Name == account }),
		"deploy/nats/permissions.conf defines no account %s", account)
	for _, u := range opts.Users {
		require.NotNil(t, u.Account, "deploy/nats/permissions.conf: user %s is in no account", u.Username)
		require.Equal(t, account, u.Account.Name, "deploy/nats/permissions.conf: user %s is not in account %s", u.Username, account)
	}
	return opts
}

// violations collects the permission violations the server logs, by user.
type violations struct {
	mu   sync.Mutex
	seen map[string][]string // user -> "pub SUBJECT" or "sub SUBJECT", in order
}

var violationRe = regexp.MustCompile(`"` + account + `/user:([^"]+)" - (Publish|Subscription) Violation - Subject "([^"]+)"`)

func (v *violations) Errorf(format string, a ...any) {
	m := violationRe.FindStringSubmatch(fmt.Sprintf(format, a...))
	if m == nil {
		return
	}
	kind := map[string]string{"Publish": "pub", "Subscription": "sub"}[m[2]]
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string][]string{}
	}
	v.seen[m[1]] = append(v.seen[m[1]], kind+" "+m[3])
}

func (*violations) Noticef(string, ...any) {}
func (*violations) Warnf(string, ...any)   {}
func (*violations) Fatalf(string, ...any)  {}
func (*violations) Debugf(string, ...any)  {}
func (*violations) Tracef(string, ...any)  {}

// of returns the distinct violations of user, sorted.
func (v *violations) of(user string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := slices.Clone(v.seen[user])
	slices.Sort(out)
	return slices.Compact(out)
}

// permWorld is a server running with exactly the documented users, plus
// the test's admin.
type permWorld struct {
	*world // the admin's connection
	denied *violations
}

func newPermWorld(t *testing.T) *permWorld {
	t.Helper()
	opts := documentedOptions(t)
	acc := opts.Accounts[slices.IndexFunc(opts.Accounts, func(a *server.Account) bool { return a.Name == account })]
	opts.Users = append(opts.Users, &server.User{Username: admin, Password: passwords[admin], Account: acc})
	opts.NoLog, opts.NoSigs = true, true
	s := natstest.Start(t, opts)
	v := &violations{}
	s.SetLogger(v, false, false)
	return &permWorld{world: newWorldOpts(t, s.ClientURL(), nats.UserInfo(admin, passwords[admin])), denied: v}
}

// userEnv is the environment that makes the binary connect as user.
func userEnv(user string) []string {
	return []string{"NATS_USER=" + user, "NATS_PASSWORD=" + passwords[user], "CONSUMER_NATS_INBOX_PREFIX=" + inboxPrefix(user)}
}

// inboxPrefix is the reply prefix the docs give user: _INBOX_meter_consumer
// for meter-consumer, and for the provisioning user, which runs the same
// Deployment.
func inboxPrefix(user string) string {
	if user == provisioner {
		user = serviceUser
	}
	return "_INBOX_" + strings.ReplaceAll(user, "-", "_")
}

// runDLQ runs "consumer dlq ARGS" as user and returns its output and exit
// code. It may run in a goroutine.
func (w *permWorld) runDLQ(t *testing.T, user string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return w.runAs(t, user, append([]string{"dlq"}, args...)...)
}

// runAs runs the binary with ARGS as user and returns its output and exit
// code. It may run in a goroutine.
func (w *permWorld) runAs(t *testing.T, user string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--nats-url", w.url)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, userEnv(user)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		assert.NoError(t, err) // not require: this may run in a goroutine
		code = -1
	}
	return out.String(), errOut.String(), code
}

// fleetLabels are the labels every series of the service carries: its
// stream and durable.
const fleetLabels = `{durable="meter-consumer",stream="METER_READS"}`

// metricValue returns the value of the sample named name (with its labels,
// if any) in a Prometheus text exposition.
func metricValue(body, name string) (float64, bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// copySeqs maps each dead-letter copy's Dlq-Sequence to its sequence in the
// dead-letter stream; marks are not copies.
func (w *permWorld) copySeqs(t *testing.T) map[uint64]uint64 {
	t.Helper()
	out := map[uint64]uint64{}
	for _, m := range w.dlqMsgs(t) {
		if dlq.IsMark(m.Header) {
			continue
		}
		if src, err := strconv.ParseUint(m.Header.Get("Dlq-Sequence"), 10, 64); err == nil {
			out[src] = m.Sequence
		}
	}
	return out
}

// marks returns the marks stored in the dead-letter stream, in order.
func (w *permWorld) marks(t *testing.T) []dlq.Mark {
	t.Helper()
	var out []dlq.Mark
	for _, m := range w.dlqMsgs(t) {
		if mk, ok := dlq.ParseMark(m.Header); ok {
			out = append(out, mk)
		}
	}
	return out
}

// dlqMsgs returns the messages of the dead-letter stream, in order.
func (w *permWorld) dlqMsgs(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	st, err := w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	info := st.CachedInfo()
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		if m, err := st.GetMsg(t.Context(), seq); err == nil {
			out = append(out, m)
		}
	}
	return out
}

func (w *permWorld) durableInfo(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := w.js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)
	return c.CachedInfo()
}

// provision runs the binary as the provisioning user: once with
// --create-streams on an empty server, then, after the source stream, the
// dead-letter stream and the durable were changed by hand, with --reconcile,
// which puts them back.
func (w *permWorld) provision(t *testing.T, conn []string) {
	t.Helper()
	p := startConsumerEnv(t, "provision", userEnv(provisioner), slices.Concat(conn, []string{"--create-streams"})...)
	code, _ := p.Term(10 * time.Second)
	require.Zero(t, code, p.Output())
	assert.Zero(t, p.Count("NATS refused a permission"), "provisioning with --create-streams")
	st, err := w.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.Duplicates = 5 * time.Minute
	_, err = w.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	dlqStream, err := w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	dlqCfg := dlqStream.CachedInfo().Config
	dlqCfg.Duplicates = 15 * time.Minute
	_, err = w.js.UpdateStream(t.Context(), dlqCfg)
	require.NoError(t, err)
	dcfg := w.durableInfo(t).Config
	dcfg.MaxDeliver = 5
	_, err = w.js.UpdateConsumer(t.Context(), "METER_READS", dcfg)
	require.NoError(t, err)
	p = startConsumerEnv(t, "reconcile", userEnv(provisioner), slices.Concat(conn, []string{"--reconcile"})...)
	code, _ = p.Term(10 * time.Second)
	require.Zero(t, code, p.Output())
	assert.Zero(t, p.Count("NATS refused a permission"), "provisioning with --reconcile")
	assert.Equal(t, -1, w.durableInfo(t).Config.MaxDeliver, "the durable reconciled")
	st, err = w.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, st.CachedInfo().Config.Duplicates, "the stream reconciled")
	dlqStream, err = w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	assert.Equal(t, 20*time.Minute, dlqStream.CachedInfo().Config.Duplicates, "the dead-letter stream reconciled")
}

// TestDocumentedPermissions runs the binary as the users
// deploy/nats/permissions.conf defines, with exactly their permissions: provisioning, the
// service through acks, dead letters (the look-up past the duplicate window
// included), a hand-back at a stop and its backlog readings, then the
// operators' tools. Every permission violation the server logs must be one
// the test provoked on purpose.
func TestDocumentedPermissions(t *testing.T) {
	t.Parallel()
	w := newPermWorld(t)
	e := newEngine(t, func(key string, _ int) int {
		if strings.HasPrefix(key, "BAD@") {
			return http.StatusUnprocessableEntity // until the rate engine's data is fixed
		}
		return http.StatusOK
	})
	conn := []string{"--nats-url", w.url, "--downstream-url", e.srv.URL}

	w.provision(t, conn)

	// A dead-letter stream that refuses copies for now (full: one message,
	// discard new), forgets message ids within seconds, so that every retried
	// copy is looked for first (internal/dlq/find.go) as a copy retried past
	// a 20m window would be, and takes messages of 2 KiB at most, so that a
	// bigger read's copy is truncated and its replay reads the full read
	// from the source stream.
	dlqStream, err := w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	dlqCfg := dlqStream.CachedInfo().Config
	dlqCfg.Duplicates, dlqCfg.MaxMsgs, dlqCfg.MaxMsgSize = 30*time.Second, 1, 2048
	_, err = w.js.UpdateStream(t.Context(), dlqCfg)
	require.NoError(t, err)
	_, err = w.js.Publish(t.Context(), "meter.dlq.filler", []byte("fills the stream"))
	require.NoError(t, err)

	// Reads 1-3 are accepted, 4 (4 KiB) refused by the rate engine, 5 is
	// not a read.
	w.publish("OK", 3, 0)
	badBody, badKey := read("BAD", 0)
	badBody = append(badBody[:len(badBody)-1], fmt.Sprintf(`,"pad":%q}`, strings.Repeat("x", 4096))...)
	w.publishBody("meter.reads.BAD", badBody, badKey, nil)
	w.publishBody("meter.reads.INV", []byte("not json"), "INV", nil)

	svc := slices.Concat(conn, []string{"--http-addr", "127.0.0.1:0", "--shutdown-timeout", "300ms"})
	c1 := startConsumerEnv(t, "service-1", userEnv(serviceUser), svc...)
	addr, _ := c1.First("consuming")["http"].(string)
	require.NotEmpty(t, addr)

	const rejected = "dead-letter copy rejected by the server; read NAKed, not terminated, until the cause is fixed"
	require.Eventually(t, func() bool {
		return len(logged(c1, "ack")) == 3 &&
			len(logged(c1, rejected, "stream_seq", "4")) >= 2 && len(logged(c1, rejected, "stream_seq", "5")) >= 2
	}, 10*time.Second, 10*time.Millisecond, "acks, and copies refused then retried (looked for first)")
	assert.Zero(t, c1.Count("dead-letter copy not confirmed; read NAKed, not terminated"),
		"the look-up for an earlier copy failed (it runs before every retried copy here)")

	// The backlog readings: the first is taken at start, with reads 4 and 5
	// unsettled, so it reads the oldest unsettled read too, and ends with
	// the look-up of the records bucket's stream (its series is made then).
	var metrics string
	require.Eventually(t, func() bool {
		_, metrics = httpGet(t, "http://"+addr+"/metrics")
		age, _ := metricValue(metrics, "meter_consumer_oldest_unacked_age_seconds"+fleetLabels)
		_, bucketRead := metricValue(metrics, "meter_consumer_records_bucket_present"+fleetLabels)
		errs, _ := metricValue(metrics, "meter_consumer_lag_read_errors_total"+fleetLabels)
		return age > 0 && bucketRead || errs > 0
	}, 10*time.Second, 20*time.Millisecond, "no backlog reading") // a refused request times out in 7.5s
	errs, ok := metricValue(metrics, "meter_consumer_lag_read_errors_total"+fleetLabels)
	assert.True(t, ok)
	assert.Zero(t, errs, "backlog readings failed")
	age, _ := metricValue(metrics, "meter_consumer_oldest_unacked_age_seconds"+fleetLabels)
	assert.Positive(t, age, "the oldest unsettled read")
	msgs, _ := metricValue(metrics, "meter_consumer_stream_messages"+fleetLabels)
	assert.Equal(t, 5.0, msgs, "the source stream's info")
	dls, _ := metricValue(metrics, "meter_consumer_dead_letter_stream_messages"+fleetLabels)
	assert.Equal(t, 1.0, dls, "the dead-letter stream's info")
	bucket, _ := metricValue(metrics, "meter_consumer_records_bucket_present"+fleetLabels)
	assert.Equal(t, 1.0, bucket, "the records bucket's stream info")
	status, ready := httpGet(t, "http://"+addr+"/readyz")
	assert.Equal(t, http.StatusOK, status, ready)

	// Room in the dead-letter stream: both copies are stored, both reads
	// terminated.
	dlqCfg.MaxMsgs = -1
	_, err = w.js.UpdateStream(t.Context(), dlqCfg)
	require.NoError(t, err)
	require.NoError(t, dlqStream.DeleteMsg(t.Context(), 1))
	require.Eventually(t, func() bool {
		return len(logged(c1, "dead-lettered", "stream_seq", "4")) == 1 && len(logged(c1, "dead-lettered", "stream_seq", "5")) == 1
	}, 10*time.Second, 10*time.Millisecond, "reads 4 and 5 never dead-lettered")
	require.Eventually(t, func() bool {
		ci := w.durableInfo(t)
		return ci.NumAckPending == 0 && ci.NumPending == 0 && ci.AckFloor.Stream == 5
	}, 5*time.Second, 10*time.Millisecond, "reads 4 and 5 not terminated")
	copies := w.copySeqs(t)
	require.Len(t, copies, 2)
	require.Contains(t, copies, uint64(4))
	require.Contains(t, copies, uint64(5))

	// The audit user accounts for reads 1-5: three acked, two dead-lettered
	// (the dead-letter stream's filler, deleted, is no copy), and may not
	// delete the fleet's durable.
	out, errOut, code := w.runAs(t, auditUser, "audit", "--from-seq", "1", "--to-seq", "5")
	assert.Zero(t, code, out+errOut)
	assert.Contains(t, out, "every read of the period is explained")
	assert.Regexp(t, `billed\s+3\s`, out)
	assert.Regexp(t, `dead-lettered\s+2\s`, out)
	w.auditUserIsRefused(t)

	// The read-only operator reads the dead-letter stream...
	out, errOut, code = w.runDLQ(t, dlqReader, "list")
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "http_422")
	assert.Contains(t, out, "invalid_payload")
	out, errOut, code = w.runDLQ(t, dlqReader, "stats")
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "2 dead-lettered reads in METER_READS_DLQ")
	out, errOut, code = w.runDLQ(t, dlqReader, "show", strconv.FormatUint(copies[4], 10))
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "Dlq-Sequence: 4")
	assert.Contains(t, out, "payload truncated to fit the dead-letter stream")
	out, errOut, code = w.runDLQ(t, dlqReader, "replay", "--dry-run")
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "would replay 2")
	// ... and cannot replay or purge (the purge is refused its first mark,
	// before any delete). Each waits for its refused request's timeout (5s,
	// 10s for a mark): run them while the rest goes on.
	type result struct {
		out, errOut string
		code        int
	}
	var refusedReplay, refusedPurge result
	var readerDone sync.WaitGroup
	readerDone.Go(func() {
		refusedReplay.out, refusedReplay.errOut, refusedReplay.code = w.runDLQ(t, dlqReader, "replay")
	})
	readerDone.Go(func() {
		refusedPurge.out, refusedPurge.errOut, refusedPurge.code = w.runDLQ(t, dlqReader, "purge", "--cause", "invalid_payload", "--yes")
	})

	// A stop with a read in flight hands it back, uncharged: an attempt is
	// a call, and nothing needs recording (the records bucket is written by
	// the decisions about the BAD reads above).
	e.setLatency(time.Minute) // until the consumer gives up
	before := e.arrived()
	holdBody, holdKey := read("HOLD", 0)
	w.publishBody("meter.reads.HOLD", holdBody, holdKey, nil)
	require.Eventually(t, func() bool { return e.arrived() > before }, 5*time.Second, 5*time.Millisecond)
	code, _ = c1.Term(10 * time.Second)
	assert.Zero(t, code)
	assert.Len(t, logged(c1, "handed back", "stream_seq", "6"), 1, "read 6 handed back at the stop")
	kv, err := w.js.KeyValue(t.Context(), "METER_READS_meter-consumer_records")
	require.NoError(t, err)
	_, err = kv.Get(t.Context(), "6")
	assert.ErrorIs(t, err, jetstream.ErrKeyNotFound, "a hand-back writes no record")
	for _, msg := range []string{"NATS refused a permission", "record not stored", "record look-up failed; the delivery count alone decides", "settle", "reading the backlog",
		"dead-letter look-up consumer not deleted; the server removes it once idle"} {
		assert.Zero(t, c1.Count(msg), "service-1 logged %q", msg)
	}

	// What the service user must not do.
	w.serviceUserIsRefused(t)

	// The next replica takes read 6 at its first attempt: it looks the
	// record up (and may), finds none, and calls.
	e.setLatency(0)
	e.setPolicy(nil) // the rate engine's data is fixed
	c2 := startConsumerEnv(t, "service-2", userEnv(serviceUser), svc...)
	require.Eventually(t, func() bool {
		return len(logged(c2, "ack", "stream_seq", "6", "deliveries", "2")) == 1
	}, 10*time.Second, 10*time.Millisecond, "read 6 not acked on its second delivery")
	assert.Zero(t, c2.Count("record look-up failed; the delivery count alone decides"))

	readerDone.Wait()
	assert.NotZero(t, refusedReplay.code, "the read-only operator replayed:\n%s%s", refusedReplay.out, refusedReplay.errOut)
	assert.Contains(t, refusedReplay.errOut, `Permissions Violation for Publish to \"$JS.API.STREAM.INFO.METER_READS\"`)
	assert.Contains(t, refusedReplay.errOut, "(NATS refused a permission: ", "the failure says why")
	assert.Contains(t, refusedReplay.errOut, "; see docs/OPERATIONS.md, NATS permissions)", "the failure points at the permissions")
	assert.NotZero(t, refusedPurge.code, "the read-only operator purged:\n%s%s", refusedPurge.out, refusedPurge.errOut)
	assert.Contains(t, refusedPurge.errOut, `Permissions Violation for Publish to \"meter.dlq._mark.meter.reads.INV\"`)
	require.Len(t, w.copySeqs(t), 2, "the read-only operator changed the dead-letter stream")
	require.Empty(t, w.marks(t), "the read-only operator marked a copy")

	// The operator sees a copy, replays the refused read (it reaches the rate
	// engine and is acked) and purges the one that is not a read; each copy
	// leaves a mark, which the audit reads.
	out, errOut, code = w.runDLQ(t, dlqOperator, "show", strconv.FormatUint(copies[5], 10))
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "Dlq-Sequence: 5")
	out, errOut, code = w.runDLQ(t, dlqOperator, "replay", "--cause", "http_422", "--by", "ops-alice")
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "replayed 1, skipped as duplicate 0, skipped at max replays 0, failed 0")
	require.Eventually(t, func() bool {
		return len(logged(c2, "ack", "subject", "meter.reads.BAD")) == 1
	}, 10*time.Second, 10*time.Millisecond, "the replayed read was not acked")
	delivered, _ := e.delivered()
	assert.True(t, delivered[badKey], "the replayed read never reached the rate engine")
	src, err := w.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	replayed, err := src.GetMsg(t.Context(), 7)
	require.NoError(t, err)
	assert.Equal(t, badBody, replayed.Data, "the replay is the full read, not its truncated copy")
	out, errOut, code = w.runDLQ(t, dlqOperator, "purge", "--cause", "invalid_payload", "--yes", "--by", "ops-bob", "--why", "not a read")
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "deleted 1 dead-lettered reads from METER_READS_DLQ")
	assert.Empty(t, w.copySeqs(t))
	marks := w.marks(t)
	require.Len(t, marks, 2, "a mark per copy replayed or purged")
	for i, want := range []dlq.Mark{
		{Kind: dlq.MarkReplayed, Stream: "METER_READS", Sequence: 4, Subject: "meter.reads.BAD", CopySequence: copies[4], ReplayedAs: 7, By: "ops-alice"},
		{Kind: dlq.MarkPurged, Stream: "METER_READS", Sequence: 5, Subject: "meter.reads.INV", CopySequence: copies[5], By: "ops-bob", Why: "not a read"},
	} {
		got := marks[i]
		assert.False(t, got.PublishedAt.IsZero(), "the read's stream timestamp")
		assert.False(t, got.At.IsZero())
		got.PublishedAt, got.At = time.Time{}, time.Time{}
		assert.Equal(t, want, got)
	}

	code, _ = c2.Term(10 * time.Second)
	assert.Zero(t, code)
	for _, msg := range []string{"NATS refused a permission", "record not stored", "settle", "reading the backlog"} {
		assert.Zero(t, c2.Count(msg), "service-2 logged %q", msg)
	}

	// Every violation the server saw was provoked on purpose.
	assert.Equal(t, []string{
		"pub $JS.API.CONSUMER.CREATE.METER_READS.intruder",
		"pub $JS.API.STREAM.DELETE.METER_READS",
		"pub $JS.API.STREAM.MSG.DELETE.METER_READS_DLQ",
		"pub $JS.API.STREAM.PURGE.METER_READS",
		"pub meter.reads.north",
		"sub meter.reads.>",
	}, w.denied.of(serviceUser))
	assert.Equal(t, []string{
		"pub $JS.API.STREAM.INFO.METER_READS",
		"pub meter.dlq._mark.meter.reads.INV",
	}, w.denied.of(dlqReader))
	assert.Empty(t, w.denied.of(dlqOperator))
	assert.Empty(t, w.denied.of(provisioner))
	assert.Equal(t, []string{
		"pub $JS.API.CONSUMER.CREATE.METER_READS.intruder",
		"pub $JS.API.CONSUMER.DELETE.METER_READS.meter-consumer",
	}, w.denied.of(auditUser))
}

// auditUserIsRefused checks that the audit's user may neither delete the
// fleet's durable nor create a consumer on the source stream.
func (w *permWorld) auditUserIsRefused(t *testing.T) {
	t.Helper()
	nc, err := nats.Connect(w.url, nats.UserInfo(auditUser, passwords[auditUser]), nats.CustomInboxPrefix(inboxPrefix(auditUser)),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	assert.Error(t, js.DeleteConsumer(ctx, "METER_READS", "meter-consumer"))
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = js.CreateConsumer(ctx, "METER_READS", jetstream.ConsumerConfig{Durable: "intruder"})
	assert.Error(t, err)
	require.Eventually(t, func() bool { return len(w.denied.of(auditUser)) == 2 }, 5*time.Second, 10*time.Millisecond)
	w.durableInfo(t) // still there
}

// serviceUserIsRefused checks, with the service's own user, that its
// permissions are enforced: each attempt below is refused by the server,
// and nothing changed.
func (w *permWorld) serviceUserIsRefused(t *testing.T) {
	t.Helper()
	var mu sync.Mutex
	var refused []string
	nc, err := nats.Connect(w.url, nats.UserInfo(serviceUser, passwords[serviceUser]), nats.CustomInboxPrefix(inboxPrefix(serviceUser)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			refused = append(refused, err.Error())
			mu.Unlock()
		}))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	src, err := js.Stream(t.Context(), "METER_READS") // allowed: its info
	require.NoError(t, err)
	dlqStream, err := js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	before := src.CachedInfo().State.Msgs
	dead := dlqStream.CachedInfo().State.Msgs

	tests := []struct {
		name string
		try  func(ctx context.Context) error
		want string // the server's refusal
	}{
		{"delete the source stream", func(ctx context.Context) error { return js.DeleteStream(ctx, "METER_READS") },
			`Publish to "$JS.API.STREAM.DELETE.METER_READS"`},
		{"purge the source stream", func(ctx context.Context) error { return src.Purge(ctx) },
			`Publish to "$JS.API.STREAM.PURGE.METER_READS"`},
		{"publish a read", func(ctx context.Context) error {
			_, err := js.Publish(ctx, "meter.reads.north", []byte(`{}`))
			return err
		}, `Publish to "meter.reads.north"`},
		{"delete a dead-letter copy", func(ctx context.Context) error { return dlqStream.DeleteMsg(ctx, 1) },
			`Publish to "$JS.API.STREAM.MSG.DELETE.METER_READS_DLQ"`},
		{"create a consumer on the source stream", func(ctx context.Context) error {
			_, err := js.CreateConsumer(ctx, "METER_READS", jetstream.ConsumerConfig{Durable: "intruder"})
			return err
		}, `Publish to "$JS.API.CONSUMER.CREATE.METER_READS.intruder"`},
	}
	var want []string
	for _, tt := range tests {
		// A refused request goes unanswered: it ends at its deadline.
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		assert.Error(t, tt.try(ctx), tt.name)
		cancel()
		want = append(want, tt.want)
	}
	_, err = nc.SubscribeSync("meter.reads.>")
	require.NoError(t, err) // refused asynchronously
	want = append(want, `Subscription to "meter.reads.>"`)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range want {
			if !slices.ContainsFunc(refused, func(r string) bool { return strings.Contains(r, "Permissions Violation for "+s) }) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "not every attempt was refused")

	st, err := w.js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err, "the source stream is gone")
	assert.Equal(t, before, st.CachedInfo().State.Msgs, "the source stream changed")
	st, err = w.js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	assert.Equal(t, dead, st.CachedInfo().State.Msgs, "the dead-letter stream changed")
	_, err = w.js.Consumer(t.Context(), "METER_READS", "intruder")
	assert.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
}

// permissionsBlock matches what defines NATS permissions in a fenced block
// of a document: a nats-server configuration's permissions or users, or an
// nsc command that adds or changes a user's permissions.
var permissionsBlock = regexp.MustCompile(`(?m)\bpermissions\s*[:{=]|^\s*users\s*[:=\[]|\bnsc\s+(add|edit)\s+user\b|--(allow|deny)-(pub|sub|pubsub)\b`)

// TestPermissionsAreDefinedOnce: the NATS permissions are defined in one
// place, the two files under deploy/nats/; no document of the repository
// holds a block that defines a permission (they link there), and
// docs/OPERATIONS.md's section NATS permissions links to both files.
func TestPermissionsAreDefinedOnce(t *testing.T) {
	t.Parallel()
	var docs []string
	require.NoError(t, filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".md"):
			docs = append(docs, path)
		}
		return nil
	}))
	require.Contains(t, docs, filepath.Clean(operationsDoc))
	for _, path := range docs {
		for _, b := range fencedBlocksAny(t, path) {
			if b.lang == "conf" || permissionsBlock.MatchString(b.body) {
				t.Errorf("%s:%d: a block that defines NATS permissions; they are defined once, in deploy/nats/: link there", path, b.line)
			}
		}
	}
	section := markdownSection(t, operationsDoc, "## NATS permissions")
	assert.Contains(t, section, "(../deploy/nats/permissions.conf)", "the section links to the configuration")
	assert.Contains(t, section, "(../deploy/nats/users.sh)", "the section links to the nsc commands")
}

// fencedBlock is a fenced code block of a markdown file.
type fencedBlock struct {
	lang, body string
	line       int // of the opening fence
}

// fencedBlocksAny returns every fenced code block of the markdown file at
// path, whatever its info string.
func fencedBlocksAny(t *testing.T, path string) []fencedBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []fencedBlock
	var cur *fencedBlock
	var body strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &fencedBlock{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.body = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
	}
	require.Nil(t, cur, "%s: a fenced block is not closed", path)
	return blocks
}

// markdownSection returns the section of the markdown file at path that
// starts with the heading line, up to the next heading of its level or
// above.
func markdownSection(t *testing.T, path, heading string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	level := strings.Index(heading, " ")
	_, rest, ok := strings.Cut(string(data), "\n"+heading+"\n")
	require.True(t, ok, "%s: no heading %q", path, heading)
	lines := strings.Split(rest, "\n")
	fence := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
		}
		if n := len(line) - len(strings.TrimLeft(line, "#")); !fence && n > 0 && n <= level && strings.HasPrefix(line[n:], " ") {
			return strings.Join(lines[:i], "\n")
		}
	}
	return rest
}

// grant is what a user may publish and subscribe to.
type grant struct{ Pub, Sub []string }

// TestDocumentedNscCommandsMatchTheConf: deploy/nats/users.sh's `nsc add user`
// commands grant each user exactly what their nats-server configuration
// grants, so that the test above, which runs the configuration, stands for
// both.
func TestDocumentedNscCommandsMatchTheConf(t *testing.T) {
	t.Parallel()
	opts := documentedOptions(t)
	want := map[string]grant{}
	for _, u := range opts.Users {
		require.NotNil(t, u.Permissions, "user %s has no permissions", u.Username)
		var g grant
		if p := u.Permissions.Publish; p != nil {
			assert.Empty(t, p.Deny, "user %s", u.Username)
			g.Pub = sorted(p.Allow)
		}
		if s := u.Permissions.Subscribe; s != nil {
			assert.Empty(t, s.Deny, "user %s", u.Username)
			g.Sub = sorted(s.Allow)
		}
		want[u.Username] = g
	}
	assert.Equal(t, want, nscUsers(t, usersScript))
	assert.ElementsMatch(t, []string{serviceUser, provisioner, dlqReader, dlqOperator, auditUser}, slices.Collect(maps.Keys(want)))
	// TestDocumentedPermissions provisions with the provisioning user but
	// consumes with the service's: the provisioning user's run of the
	// service needs every permission of the service's.
	assert.Subset(t, want[provisioner].Pub, want[serviceUser].Pub, "the provisioning user runs the service too")
	assert.Equal(t, want[serviceUser].Sub, want[provisioner].Sub)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// nscUsers reads the `nsc add user` commands of the shell script at
// path, as a shell would split them, and returns what each grants.
func nscUsers(t *testing.T, path string) map[string]grant {
	t.Helper()
	script, err := os.ReadFile(path)
	require.NoError(t, err)
	users := map[string]grant{}
	for _, cmd := range strings.Split(strings.ReplaceAll(string(script), "\\\n", " "), "\n") {
		if f := strings.Fields(cmd); len(f) < 3 || f[0] != "nsc" || f[1] != "add" || f[2] != "user" {
			continue
		}
		words := shellWords(t, cmd)
		var name, acc string
		var g grant
		for i := 3; i < len(words); i++ {
			flag, value, inline := strings.Cut(words[i], "=")
			if !inline {
				require.Less(t, i+1, len(words), "%s: %s has no value in %q", path, flag, cmd)
				i++
				value = words[i]
			}
			values := strings.Split(value, ",")
			switch flag {
			case "--name", "-n":
				name = value
			case "--account", "-a":
				acc = value
			case "--allow-pub":
				g.Pub = append(g.Pub, values...)
			case "--allow-sub":
				g.Sub = append(g.Sub, values...)
			case "--allow-pubsub":
				g.Pub, g.Sub = append(g.Pub, values...), append(g.Sub, values...)
			default:
				t.Errorf("%s: nsc add user: flag %s is not checked against the configuration", path, flag)
			}
		}
		assert.Equal(t, account, acc, "%s: nsc add user --name %s: account", path, name)
		require.NotContains(t, users, name, "%s: nsc add user --name %s again", path, name)
		g.Pub, g.Sub = sorted(g.Pub), sorted(g.Sub)
		users[name] = g
	}
	return users
}

// shellWords splits a command line as sh does for what the documents use:
// words separated by blanks, single and double quotes, backslash escapes and
// a # comment at the start of a word.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for i := 0; i < len(line); i++ {
		c := rune(line[i])
		switch {
		case quote == '\'' && c == '\'', quote == '"' && c == '"':
			quote = 0
		case quote == '\'':
			w.WriteRune(c)
		case quote == '"' && c == '\\' && i+1 < len(line) && strings.ContainsRune(`"\$`+"`", rune(line[i+1])):
			i++
			w.WriteByte(line[i])
		case quote == '"':
			require.NotEqual(t, '$', c, "a $ in double quotes is expanded by the shell: %q", line)
			w.WriteRune(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			in = true
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !in:
			return words
		default:
			require.False(t, c == '$' || c == '>' || c == '*', "unquoted %q in %q: the shell would expand it", c, line)
			w.WriteRune(c)
			in = true
		}
	}
	require.Zero(t, quote, "unterminated quote in %q", line)
	if in {
		words = append(words, w.String())
	}
	return words
}
