package deploy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// TestRealScrape runs the real binary in demo mode (an embedded NATS server,
// a simulated head-end and rate engine) and a real Prometheus server that
// scrapes it every second with the alert rules loaded, then checks that:
// the metrics page passes promtool check metrics; every metric the dashboard
// and the rules name is on it; Prometheus ingests the series; every
// dashboard query and variable evaluates without error (the main ones with
// data); every alert rule evaluates without error and MeterConsumerDown is
// quiet. Skipped when the prometheus binary is not installed (CI installs it).
func TestRealScrape(t *testing.T) {
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
		"--demo", "--data-dir", filepath.Join(dir, "nats"),
		"--nats-listen", natstest.FreeAddr(t), "--http-addr", httpAddr, "--log-format", "json")
	require.Eventually(t, func() bool {
		code, _ := get(t, "http://"+httpAddr+"/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the consumer never became ready:\n%s", consumer.Output())

	// The metrics page: clean for promtool, and holds every name we use.
	code, body := get(t, "http://"+httpAddr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	if promtoolBin, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtoolBin, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "promtool check metrics")
		assert.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics")
	} else {
		t.Log("promtool is not installed: the metrics page is not linted")
	}
	onPage := pageNames(body)
	rules, recordedNames := ruleExpressions(t)
	recorded := map[string]bool{}
	for _, r := range recordedNames {
		recorded[r] = true
	}
	for _, e := range append(dashboardExpressions(t), rules...) {
		for _, n := range metricNames(e.expr) {
			assert.True(t, onPage[n] || scrapeSeries[n] || recorded[n] || externalSeries[n],
				"%s: %s is not on the real /metrics page", e.where, n)
		}
	}

	// Prometheus, scraping every second, with the alert rules.
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

	require.Eventually(t, func() bool {
		res, err := query(t, api, "meter_consumer_messages_total")
		return err == nil && len(res) > 0
	}, 60*time.Second, 250*time.Millisecond, "Prometheus never ingested meter_consumer_messages_total:\n%s", prom.Output())
	require.Eventually(t, func() bool {
		res, err := query(t, api, `sum(rate(meter_consumer_messages_total{outcome="ack"}[5s])) > 0`)
		return err == nil && len(res) > 0
	}, 30*time.Second, 250*time.Millisecond, "the demo's reads are never acked:\n%s", consumer.Output())

	// Every dashboard query evaluates; the main panels have data.
	subst := strings.NewReplacer("$__rate_interval", "5s", "$__range", "1m",
		"$namespace", "meter-test", "$job", "meter-consumer", "$pod", ".*")
	withData := map[string]bool{
		"Throughput by outcome": true, "Failure causes": true, "In flight": true, "Breaker state by replica": true,
		"Backlog": true, "Handle duration percentiles": true, "Resident memory by replica": true, "Settled reads/s": true,
		"Retry delay": true, "Delivery attempt at settlement": true, "Ack pending": true,
	}
	for _, p := range readDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			q := subst.Replace(tg.Expr)
			if !withData[p.Title] {
				_, err := query(t, api, q)
				assert.NoError(t, err, "%s: %s", p.Title, q)
				continue
			}
			var res []json.RawMessage
			assert.Eventually(t, func() bool {
				res, err = query(t, api, q)
				return err == nil && len(res) > 0
			}, 15*time.Second, 250*time.Millisecond, "%s: %s: no data (%v)", p.Title, q, err)
		}
	}
	for _, v := range []struct{ label, match, want string }{
		{"namespace", "meter_consumer_messages_total", "meter-test"},
		{"job", `meter_consumer_messages_total{namespace="meter-test"}`, "meter-consumer"},
		{"pod", `meter_consumer_messages_total{namespace="meter-test", job="meter-consumer"}`, "meter-consumer-0"},
	} {
		var got struct {
			Status string   `json:"status"`
			Data   []string `json:"data"`
		}
		code, body := get(t, api+"label/"+v.label+"/values?"+url.Values{"match[]": {v.match}}.Encode())
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		assert.Contains(t, got.Data, v.want, "variable %s", v.label)
	}

	// Every alert rule evaluates cleanly; with a replica up, none is
	// firing, and MeterConsumerDown is not even pending.
	type ruleState struct {
		Name, Health, LastError, State, Type string
		LastEvaluation                       time.Time
	}
	var states []ruleState
	require.Eventually(t, func() bool {
		code, body := get(t, api+"rules")
		if code != http.StatusOK {
			return false
		}
		var got struct {
			Data struct {
				Groups []struct{ Rules []ruleState }
			}
		}
		if json.Unmarshal([]byte(body), &got) != nil {
			return false
		}
		states = states[:0]
		for _, g := range got.Data.Groups {
			states = append(states, g.Rules...)
		}
		for _, s := range states {
			if s.LastEvaluation.IsZero() || s.Name == "MeterConsumerDown" && s.State != "inactive" {
				return false
			}
		}
		return len(states) > 0
	}, 20*time.Second, 250*time.Millisecond, "rules: %+v", &states)
	assert.Len(t, states, len(alerts(t))+len(recorded))
	for _, s := range states {
		assert.Equal(t, "ok", s.Health, "%s: %s", s.Name, s.LastError)
		assert.NotEqual(t, "firing", s.State, s.Name)
	}

	// Stop both, gracefully.
	code, _ = prom.Term(20 * time.Second)
	assert.Zero(t, code, "prometheus exit status")
	code, _ = consumer.Term(20 * time.Second)
	assert.Zero(t, code, "consumer exit status")
	assert.Equal(t, 1, consumer.Count("stopped cleanly"))
}

var client = &http.Client{Timeout: 5 * time.Second}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// query runs an instant query and returns its result vector.
func query(t *testing.T, api, q string) ([]json.RawMessage, error) {
	t.Helper()
	code, body := get(t, api+"query?"+url.Values{"query": {q}}.Encode())
	var got struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		return nil, fmt.Errorf("HTTP %d: %s", code, body)
	}
	if got.Status != "success" {
		return nil, fmt.Errorf("%s: %s", got.Status, got.Error)
	}
	return got.Data.Result, nil
}

// pageNames returns the series names on a text-format metrics page.
func pageNames(body string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// proc is a started process whose output is kept for the failure message.
