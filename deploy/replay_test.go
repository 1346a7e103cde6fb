package deploy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

// TestReplayUpButNotConsuming replays the first failure of issue 19 with
// the real parts: the real binary pointed at a NATS server that is not
// there (unreachable, egress blocked), a real Prometheus scraping it every
// second with the shipped rules. The target is up, so MeterConsumerDown
// stays inactive; the replica says it does not consume and why
// (meter_consumer_not_consuming{reason="connecting"}), and
// MeterConsumerNotConsuming is pending for its stream and durable (it
// fires after its 10 minutes, which promtool's cases cover). The
// dashboard lists the replica and counts it running, not consuming. Skipped when
// the prometheus binary is not installed (CI installs it).
func TestReplayUpButNotConsuming(t *testing.T) {
	t.Parallel()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (apt-get install prometheus)")
	}
	dir := t.TempDir()
	bin, err := proctest.Build(dir, false)
	require.NoError(t, err)

	httpAddr := natstest.FreeAddr(t)
	consumer := proctest.Start(t, "consumer", bin, nil,
		"--nats-url", "nats://"+natstest.FreeAddr(t), "--downstream-url", "http://127.0.0.1:9/reads",
		"--http-addr", httpAddr, "--log-format", "json")
	want := `meter_consumer_not_consuming{durable="meter-consumer",reason="connecting",stream="METER_READS"} 1`
	require.Eventually(t, func() bool {
		code, body := get(t, "http://"+httpAddr+"/metrics")
		return code == http.StatusOK && strings.Contains(body, want) &&
			strings.Contains(body, `meter_consumer_consuming{durable="meter-consumer",stream="METER_READS"} 0`)
	}, 30*time.Second, 100*time.Millisecond, "the replica never said it is not consuming:\n%s", consumer.Output())
	code, _ := get(t, "http://"+httpAddr+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)

	alertsFile, err := filepath.Abs(filepath.FromSlash(alertsPath))
	require.NoError(t, err)
	promAddr := natstest.FreeAddr(t)
	promCfg := filepath.Join(dir, "prom.yml")
	require.NoError(t, os.WriteFile(promCfg, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: meter-consumer
    static_configs:
      - targets: [%q]
        labels: {namespace: meter-test, pod: meter-consumer-0}
`, alertsFile, httpAddr), 0o600))
	prom := proctest.Start(t, "prometheus", promBin, nil, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	api := "http://" + promAddr + "/api/v1/"

	type alert struct {
		Labels map[string]string
		State  string
	}
	var got []alert
	var down string
	require.Eventually(t, func() bool {
		code, body := get(t, api+"rules")
		if code != http.StatusOK {
			return false
		}
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name, State string
						Alerts      []alert
					}
				}
			}
		}
		if json.Unmarshal([]byte(body), &r) != nil {
			return false
		}
		got = nil
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				switch rule.Name {
				case "MeterConsumerNotConsuming":
					got = rule.Alerts
				case "MeterConsumerDown":
					down = rule.State
				}
			}
		}
		return len(got) == 1 && got[0].State == "pending"
	}, 30*time.Second, 250*time.Millisecond, "MeterConsumerNotConsuming never pending: %+v\n%s", &got, prom.Output())
	assert.Equal(t, map[string]string{"alertname": "MeterConsumerNotConsuming", "namespace": "meter-test",
		"job": "meter-consumer", "stream": "METER_READS", "durable": "meter-consumer", "severity": "critical",
		"owner": "meter-consumer"}, got[0].Labels)
	assert.Equal(t, "inactive", down, "the target is up: MeterConsumerDown does not see it")
	assertDashboardShowsBrokenReplica(t, api, "meter-test", "meter-consumer", "meter-consumer-0")

	code, _ = prom.Term(20 * time.Second)
	assert.Zero(t, code, "prometheus exit status")
	code, _ = consumer.Term(20 * time.Second)
	assert.Zero(t, code, "consumer exit status")
}
