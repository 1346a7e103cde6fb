package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	k8syaml "sigs.k8s.io/yaml"

	consumer "github.com/meterline/meter-consumer/cmd/consumer"
	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// runTool runs the command line in-process, with an empty environment, and
// returns its stdout, stderr and exit code; TestTheBinaryRunsTheCommandLine
// checks that the binary is the same code.
func runTool(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runToolWith(t, "", args...)
}

// runToolWith is runTool with stdin.
func runToolWith(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := consumer.Run(args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// runBinary runs the built binary with args and an environment of PATH only.
func runBinary(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

func TestDeadLetterReplayIsConsumedAndDelivered(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)

	var fixed atomic.Bool
	var mu sync.Mutex
	billed := map[string]int{}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity) // a rate table is missing
			return
		}
		mu.Lock()
		billed[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer down.Close()

	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--downstream-url", down.URL, "--http-addr", "")
	httpAddr(t, p)
	for i := range 4 {
		_, err := js.Publish(t.Context(), fmt.Sprintf("meter.reads.r%d", i%2), fmt.Appendf(nil,
			`{"meter_id":"MTR-%d","read_at":"2026-11-30T07:00:00Z","quantity":"2.000","unit":"kWh"}`, i))
		require.NoError(t, err)
	}
	dlqCount := func() uint64 {
		st, err := js.Stream(t.Context(), "METER_READS_DLQ")
		require.NoError(t, err)
		info, err := st.Info(t.Context())
		require.NoError(t, err)
		return info.State.Msgs
	}
	require.Eventually(t, func() bool { return dlqCount() == 4 }, 20*time.Second, 20*time.Millisecond)

	out, stderr, code := runTool(t, "dlq", "list", "--nats-url", s.ClientURL(), "--json", "--subject", "meter.reads.r0")
	require.Equal(t, 0, code, stderr)
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewBufferString(out))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		rows = append(rows, m)
	}
	require.Len(t, rows, 2)
	assert.Equal(t, "permanent", rows[0]["reason"])
	assert.Equal(t, "http_422", rows[0]["cause"])

	// Dry run changes nothing.
	_, stderr, code = runTool(t, "dlq", "replay", "--nats-url", s.ClientURL(), "--subject", "meter.reads.r0", "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, uint64(4), dlqCount())

	// The rate table is fixed; replay the r0 subset.
	fixed.Store(true)
	out, stderr, code = runTool(t, "dlq", "replay", "--nats-url", s.ClientURL(), "--subject", "meter.reads.r0", "--rate", "100/s", "--by", "ops-alice")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "replayed 2")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return billed["MTR-0@2026-11-30T07:00:00Z"] == 1 && billed["MTR-2@2026-11-30T07:00:00Z"] == 1
	}, 20*time.Second, 20*time.Millisecond, "the consumer delivers the replayed reads")
	assert.Equal(t, uint64(4), dlqCount(), "the replayed copies are gone, the others stay, and a mark for each replayed one")
	st, err := js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	var marks []dlq.Mark
	for seq := uint64(1); seq <= st.CachedInfo().State.LastSeq; seq++ {
		if m, err := st.GetMsg(t.Context(), seq); err == nil {
			if mk, ok := dlq.ParseMark(m.Header); ok {
				assert.Equal(t, "meter.dlq._mark.meter.reads.r0", m.Subject)
				marks = append(marks, mk)
			}
		}
	}
	require.Len(t, marks, 2)
	for _, mk := range marks {
		assert.Equal(t, dlq.MarkReplayed, mk.Kind)
		assert.Equal(t, "ops-alice", mk.By, "--by")
		assert.Positive(t, mk.ReplayedAs)
	}
	out, stderr, code = runTool(t, "dlq", "stats", "--nats-url", s.ClientURL())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "2 dead-lettered reads in METER_READS_DLQ", "the marks are not counted")

	// A purge not confirmed deletes nothing, and says so with its exit
	// code: a script without --yes must not take it for done.
	for _, answer := range []string{"no\n", ""} {
		before := dlqCount()
		out, stderr, code = runToolWith(t, answer, "dlq", "purge", "--nats-url", s.ClientURL())
		assert.Equal(t, 1, code, "answered %q", answer)
		assert.Contains(t, stderr, "type yes to confirm")
		assert.Contains(t, stderr, "purge not confirmed: nothing deleted (answer yes, or pass --yes)")
		assert.Contains(t, out, "purge cancelled, nothing deleted")
		assert.Equal(t, before, dlqCount(), "answered %q", answer)
	}

	// The others are purged, each marked with who and why.
	out, stderr, code = runTool(t, "dlq", "purge", "--nats-url", s.ClientURL(), "--yes", "--by", "ops-bob", "--why", "resent by the head-end")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "deleted 2 dead-lettered reads from METER_READS_DLQ")
	st, err = js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	var purged int
	for seq := uint64(1); seq <= st.CachedInfo().State.LastSeq; seq++ {
		if m, err := st.GetMsg(t.Context(), seq); err == nil {
			mk, ok := dlq.ParseMark(m.Header)
			require.True(t, ok, "seq %d is a copy", seq)
			if mk.Kind == dlq.MarkPurged {
				purged++
				assert.Equal(t, "meter.reads.r1", mk.Subject)
				assert.Equal(t, "ops-bob", mk.By, "--by")
				assert.Equal(t, "resent by the head-end", mk.Why, "--why")
			}
		}
	}
	assert.Equal(t, 2, purged)

	// Running the same replay again replays nothing.
	out, _, code = runTool(t, "dlq", "replay", "--nats-url", s.ClientURL(), "--subject", "meter.reads.r0")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "replayed 0")

	_, stderr, code = runTool(t, "dlq", "show", "999", "--nats-url", s.ClientURL())
	assert.NotZero(t, code)
	assert.Contains(t, stderr, "999")
	assert.Equal(t, 0, stop(p, 15*time.Second))
}

// TestPermissionsDocIsASection: the document and section a refused
// permission points at (consumer dlq, consumer audit) exist, and lead to the
// permissions (the files under deploy/nats/).
func TestPermissionsDocIsASection(t *testing.T) {
	file, heading, ok := strings.Cut(consumer.PermissionsDoc, ", ")
	require.True(t, ok, "%q: want docs/<file>, <heading>", consumer.PermissionsDoc)
	doc, err := os.ReadFile("../../" + file)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## "+heading+"\n")
	require.True(t, ok, "%s has no section %q", file, heading)
	section, _, _ = strings.Cut(section, "\n## ")
	assert.Contains(t, section, "(../deploy/nats/permissions.conf)", "the section links to the permissions")
}

// The Job of deploy/tools/dlq-job.yaml runs: its arguments and its
// environment, given to this command line against a real server (NATS_URL
// pointed at it, no creds), answer with the dead-letter stream's counts.
func TestTheDLQJobsCommandRuns(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/tools/dlq-job.yaml")
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	require.Len(t, job.Spec.Template.Spec.Containers, 1)
	c := job.Spec.Template.Spec.Containers[0]

	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	cfg, err := config.Load([]string{"--downstream-url", "http://127.0.0.1:1/reads", "--replicas", "1"}, nil)
	require.NoError(t, err)
	_, err = topology.Ensure(t.Context(), js, service.Topology(cfg))
	require.NoError(t, err)

	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	require.Contains(t, env, "NATS_URL")
	require.Contains(t, env, "NATS_CREDS")
	env["NATS_URL"] = s.ClientURL()
	delete(env, "NATS_CREDS") // the test server has no accounts
	var out, errOut bytes.Buffer
	code := consumer.Run(c.Args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.NotEmpty(t, out.String())
	t.Logf("%s", out.String())
}

// Flags may stand on both sides of show's sequence: parsing stops at it, and
// is taken up again after it. Two sequences are still one too many.
func TestDLQShowTakesFlagsAfterTheSequence(t *testing.T) {
	t.Parallel()
	_, stderr, code := runTool(t, "dlq", "show", "--nats-url", "nats://127.0.0.1:1", "5", "--dlq-stream", "SD")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "not connected", "parsed, then refused by the server")
	_, stderr, code = runTool(t, "dlq", "show", "--nats-url", "nats://127.0.0.1:1", "5", "6")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "want one dead-letter sequence")
}
