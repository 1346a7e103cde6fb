package main_test

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { proctest.Main(m, true, &binary) }

// start runs the binary with JSON logs at debug, one replica (the test
// servers are single nodes) and the given flags.
func start(t *testing.T, args ...string) *proctest.Proc {
	t.Helper()
	return proctest.Start(t, "consumer", binary, []string{"HOME=" + t.TempDir()},
		append([]string{"--log-format", "json", "--log-level", "debug", "--replicas", "1"}, args...)...)
}

// httpAddr waits for the "consuming" record and returns the HTTP address.
func httpAddr(t *testing.T, p *proctest.Proc) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		l := p.First("consuming")
		if l == nil {
			return false
		}
		addr, _ = l["http"].(string)
		return true
	}, 30*time.Second, 10*time.Millisecond, "the consumer never started consuming")
	return addr
}

// stop sends SIGTERM and returns the exit code.
func stop(p *proctest.Proc, within time.Duration) int {
	code, _ := p.Term(within)
	return code
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestBinarySettlesEndToEnd(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)

	var mu sync.Mutex
	keys := map[string]int{}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys[r.Header.Get("Idempotency-Key")]++
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "BAD") {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
	}))
	defer down.Close()

	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--downstream-url", down.URL,
		"--http-addr", "127.0.0.1:0", "--retry-base", "50ms", "--retry-cap", "200ms")
	addr := httpAddr(t, p)

	for i := range 5 {
		_, err := js.Publish(t.Context(), "meter.reads.north", fmt.Appendf(nil,
			`{"meter_id":"MTR-%d","read_at":"2026-11-30T07:00:00Z","quantity":"1.5","unit":"kWh"}`, i))
		require.NoError(t, err)
	}
	_, err := js.Publish(t.Context(), "meter.reads.north", []byte(`{"meter_id":"BAD","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`))
	require.NoError(t, err)
	_, err = js.Publish(t.Context(), "meter.reads.north", []byte(`not json`))
	require.NoError(t, err)

	cons, err := js.Consumer(t.Context(), "METER_READS", "meter-consumer")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == 7
	}, 20*time.Second, 20*time.Millisecond)

	code, body := get(t, "http://"+addr+"/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `meter_consumer_messages_total{durable="meter-consumer",outcome="ack",stream="METER_READS"} 5`)
	assert.Contains(t, body, `meter_consumer_dead_letters_total{durable="meter-consumer",reason="permanent",stream="METER_READS"} 2`)
	assert.Contains(t, body, "go_goroutines")
	assert.Contains(t, body, "process_resident_memory_bytes")
	assert.Regexp(t, `meter_consumer_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1`, body)
	code, _ = get(t, "http://"+addr+"/healthz")
	assert.Equal(t, 200, code)
	code, body = get(t, "http://"+addr+"/readyz")
	assert.Equal(t, 200, code, body)

	assert.Equal(t, 0, stop(p, 15*time.Second), "exit 0 after a clean shutdown")
	assert.NotNil(t, p.First("stopped cleanly"))

	// Logs a person reads: a short start-up line with the build, where NATS
	// and the engine are, the stream and the durable; the whole
	// configuration at debug; the version not on every line; durations as
	// in the configuration.
	started := p.First("starting meter-consumer")
	require.NotNil(t, started)
	assert.NotEmpty(t, started["version"])
	assert.Equal(t, s.ClientURL(), started["nats"])
	assert.Equal(t, "METER_READS", started["stream"])
	assert.Equal(t, "meter-consumer", started["durable"])
	assert.Equal(t, down.URL, started["engine"])
	assert.Equal(t, false, started["embedded_nats"])
	assert.ElementsMatch(t, []string{"time", "level", "msg", "version", "nats", "stream", "durable", "engine", "embedded_nats"},
		slices.Collect(maps.Keys(started)), "nothing else on the start-up line")
	configured := p.First("configuration")
	require.NotNil(t, configured, "the whole configuration, at debug")
	assert.Equal(t, "DEBUG", configured["level"])
	assert.Equal(t, down.URL, configured["config"].(map[string]any)["downstream"].(map[string]any)["url"])
	for _, msg := range []string{"consuming", "stopped cleanly"} {
		assert.NotContains(t, p.First(msg), "version", "%s: the version is on the start-up line only", msg)
	}
	assert.Equal(t, "30s", p.First("shutting down; a second signal exits at once")["timeout"])

	dl, err := js.Stream(t.Context(), "METER_READS_DLQ")
	require.NoError(t, err)
	info, err := dl.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.State.Msgs)
	mu.Lock()
	assert.Len(t, keys, 6, "5 good reads and one 422; the invalid read never reached the downstream")
	mu.Unlock()
}

func TestBinaryRejectsBadConfiguration(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "--retry-base", "500ms", "--retry-cap", "100ms", "--concurrency", "0",
		"--downstream-url", "http://127.0.0.1:1/reads")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NATS_PASSWORD=hunter2-secret", "NATS_USER=alice"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.NotZero(t, ee.ExitCode())
	assert.Contains(t, string(out), "retry.cap (100ms) must be >= retry.base (500ms)")
	assert.Contains(t, string(out), "consumer.concurrency (0)")
	assert.NotContains(t, string(out), "hunter2-secret")
}

func TestEmbeddedDemoRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	natsAddr := natstest.FreeAddr(t)
	p := start(t, "--demo", "--demo-incidents", "--data-dir", t.TempDir(), "--nats-listen", natsAddr,
		"--http-addr", "127.0.0.1:0", "--log-level", "info")
	addr := httpAddr(t, p)
	require.NotNil(t, p.First("running an embedded NATS server with JetStream"))

	// The embedded server listens where it said, for head-ends and the nats CLI.
	nc, js := natsConnect(t, "nats://"+natsAddr)
	defer nc()
	require.Eventually(t, func() bool {
		_, body := get(t, "http://"+addr+"/metrics")
		return strings.Contains(body, `meter_consumer_messages_total{durable="meter-consumer",outcome="ack",stream="METER_READS"}`) &&
			!strings.Contains(body, `meter_consumer_messages_total{durable="meter-consumer",outcome="ack",stream="METER_READS"} 0`)
	}, 30*time.Second, 100*time.Millisecond, "the demo acks reads")
	scheduled := p.First("demo: rate engine incidents scheduled")
	require.NotNil(t, scheduled, "--demo-incidents schedules them")
	assert.Equal(t, "60s normal, 30s overload, 60s normal, 20s outage, repeated", scheduled["schedule"])
	_, err := js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	code, body := get(t, "http://"+addr+"/readyz")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "embedded NATS server", "/readyz says it runs embedded")
	_, metrics := get(t, "http://"+addr+"/metrics")
	assert.Contains(t, metrics, "\nmeter_consumer_embedded_nats{durable=\"meter-consumer\",stream=\"METER_READS\"} 1\n")
	assert.Contains(t, metrics, "\nmeter_consumer_demo_rate_engine_phase{durable=\"meter-consumer\",phase=\"normal\",stream=\"METER_READS\"} 1\n", "the first minute is normal")
	started := p.First("starting meter-consumer")
	require.NotNil(t, started)
	assert.Equal(t, true, started["embedded_nats"], "the start-up line says so")
	assert.Equal(t, "embedded, listening on "+natsAddr, started["nats"])
	assert.Equal(t, "the demo's simulated rate engine", started["engine"])
	assert.Nil(t, p.First("configuration"), "the whole configuration is at debug only")
	assert.Equal(t, 0, stop(p, 40*time.Second))
}

// The image is a deployment: it never falls back to an embedded server.
// Its environment refuses to start without a NATS URL, naming the field.
func TestTheImageNeverRunsEmbedded(t *testing.T) {
	t.Parallel()
	docker, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ENV CONSUMER_NATS_EMBEDDED=false`, string(docker))
	cmd := exec.Command(binary, "--downstream-url", "http://127.0.0.1:1/reads")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CONSUMER_NATS_EMBEDDED=false"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, refusal(t, string(out)), `nats.url ("") is required when nats.embedded is false`)
}

func natsConnect(t *testing.T, url string) (func(), jetstream.JetStream) {
	t.Helper()
	nc, err := natsDial(url)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc.Close, js
}

func natsDial(url string) (*nats.Conn, error) { return nats.Connect(url) }
