package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/proctest"
)

const alertmanagerPath = "alertmanager/alertmanager.yml"

// inhibitions is what alertmanager.yml must do: each source mutes these
// targets of its own fleet (namespace, job, stream, durable), and nothing
// else.
var inhibitions = []struct {
	source  string
	targets []string
}{
	{"MeterConsumerBreakerOpenEverywhere", []string{"MeterConsumerBreakerOpen", "MeterConsumerEngineOverloaded",
		"MeterConsumerBacklogGrowing", "MeterConsumerNoProgress", "MeterConsumerRetryRatioHigh",
		"MeterConsumerAckPendingNearLimit", "MeterConsumerBillingSLOBurn"}},
	{"MeterConsumerNATSUnreachable", []string{"MeterConsumerNotConsuming", "MeterConsumerNoProgress",
		"MeterConsumerBacklogReadingStale", "MeterConsumerBacklogUnknown", "MeterConsumerBacklogGrowing",
		"MeterConsumerRecordsFailing", "MeterConsumerDeadLetterPublishFailing", "MeterConsumerBillingSLOBurn",
		"MeterConsumerBreakerOpen", "MeterConsumerBreakerOpenEverywhere"}},
	{"MeterConsumerReadsExpiring", []string{"MeterConsumerReadsExpired"}},
}

// binary returns the path of the first of names installed, or skips the
// test (CI installs them: .ci/run). Debian names the server
// prometheus-alertmanager, upstream alertmanager.
func binary(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skipf("%s is not installed (apt-get install prometheus-alertmanager)", names[0])
	return ""
}

func amtool(t *testing.T, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(binary(t, "amtool"), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "amtool %s:\n%s%s", strings.Join(args, " "), out, &stderr)
	return string(out)
}

func TestAlertmanagerCheckConfig(t *testing.T) {
	t.Parallel()
	assert.Contains(t, amtool(t, "check-config", filepath.FromSlash(alertmanagerPath)), "SUCCESS")
}

// TestAlertmanagerRoutes: each owner's alerts reach that owner's receivers
// alone (critical a page, anything else a ticket); an alert without a known
// owner reaches the default receiver.
func TestAlertmanagerRoutes(t *testing.T) {
	t.Parallel()
	type route struct {
		labels   []string
		receiver string
	}
	routes := []route{
		{[]string{"severity=critical"}, "unrouted"},
		{[]string{"owner=billing", "severity=critical"}, "unrouted"},
	}
	for _, owner := range []string{"meter-consumer", "head-end", "rate-engine", "nats"} {
		routes = append(routes,
			route{[]string{"owner=" + owner, "severity=critical"}, owner + "-page"},
			route{[]string{"owner=" + owner, "severity=warning"}, owner + "-ticket"},
			route{[]string{"owner=" + owner, "severity=info"}, owner + "-ticket"},
			route{[]string{"owner=" + owner}, owner + "-ticket"})
	}
	for _, r := range routes {
		args := append([]string{"config", "routes", "test", "--config.file=" + filepath.FromSlash(alertmanagerPath),
			"alertname=MeterConsumerNoProgress", "namespace=billing", "job=meter-consumer"}, r.labels...)
		assert.Equal(t, r.receiver, strings.TrimSpace(amtool(t, args...)), "%v", r.labels)
	}
}

// TestAlertmanagerInhibitions runs a real Alertmanager on alertmanager.yml
// and posts, for each source and each alert name (its targets, and every
// other alert shipped or named here), the source in one fleet and the alert
// in that fleet, in another partition of its namespace and in another
// namespace. Only a target in the source's own fleet is suppressed, and by
// the source. Each pair has a namespace of its own, so pairs cannot mute one
// another.
func TestAlertmanagerInhibitions(t *testing.T) {
	t.Parallel()
	bin := binary(t, "prometheus-alertmanager", "alertmanager")
	config, err := filepath.Abs(filepath.FromSlash(alertmanagerPath))
	require.NoError(t, err)
	base := "http://" + natstest.FreeAddr(t)
	am := proctest.Start(t, "alertmanager", bin, nil, "--config.file="+config, "--storage.path="+t.TempDir(),
		"--web.listen-address="+strings.TrimPrefix(base, "http://"), "--cluster.listen-address=")
	require.Eventually(t, func() bool {
		code, _ := get(t, base+"/-/ready")
		return code == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "alertmanager never became ready:\n%s", am.Output())

	names := map[string]bool{}
	for _, a := range alerts(t) {
		names[a.Alert] = true
	}
	for _, in := range inhibitions {
		names[in.source] = true
		for _, n := range in.targets {
			names[n] = true
		}
	}
	type pair struct {
		ns, source, name string
		muted            bool
	}
	var pairs []pair
	var posted []map[string]map[string]string
	post := func(name, ns, partition string) {
		posted = append(posted, map[string]map[string]string{"labels": {"alertname": name, "namespace": ns,
			"job": "meter-consumer", "stream": "METER_READS_" + partition, "durable": "meter-consumer-" + partition,
			"severity": "critical", "owner": "meter-consumer"}})
	}
	for _, in := range inhibitions {
		for name := range names {
			if name == in.source {
				continue
			}
			pairs = append(pairs, pair{fmt.Sprintf("pair%03d", len(pairs)), in.source, name, slices.Contains(in.targets, name)})
		}
	}
	// The pairs whose alert stays active first: Alertmanager hands alerts to
	// the inhibitor in the order posted, so once the last target is muted,
	// every source before it has been seen.
	for _, muted := range []bool{false, true} {
		for _, p := range pairs {
			if p.muted == muted {
				post(p.source, p.ns, "0")
				post(p.name, p.ns, "0")
				post(p.name, p.ns, "1")
				post(p.name, p.ns+"-other", "0")
			}
		}
	}
	body, err := json.Marshal(posted)
	require.NoError(t, err)
	resp, err := client.Post(base+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	type alert struct {
		Labels      map[string]string
		Fingerprint string
		Status      struct {
			State       string
			InhibitedBy []string
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, page := get(t, base+"/api/v2/alerts")
		require.Equal(c, http.StatusOK, code, page)
		var got []alert
		require.NoError(c, json.Unmarshal([]byte(page), &got))
		byKey := map[string]alert{}
		for _, a := range got {
			byKey[a.Labels["alertname"]+" "+a.Labels["namespace"]+" "+a.Labels["stream"]] = a
		}
		require.Len(c, byKey, len(posted))
		for _, p := range pairs {
			source := byKey[p.source+" "+p.ns+" METER_READS_0"]
			same, other := byKey[p.name+" "+p.ns+" METER_READS_0"], byKey[p.name+" "+p.ns+" METER_READS_1"]
			if p.muted {
				assert.Equal(c, "suppressed", same.Status.State, "%s, same fleet as %s", p.name, p.source)
				assert.Equal(c, []string{source.Fingerprint}, same.Status.InhibitedBy, "%s by %s", p.name, p.source)
			} else {
				assert.NotContains(c, same.Status.InhibitedBy, source.Fingerprint, "%s muted by %s", p.name, p.source)
			}
			for _, a := range []alert{other, byKey[p.name+" "+p.ns+"-other METER_READS_0"]} {
				assert.Equal(c, "active", a.Status.State, "%s beside %s: %v", p.name, p.source, a.Labels)
				assert.Empty(c, a.Status.InhibitedBy, "%s beside %s: %v", p.name, p.source, a.Labels)
			}
		}
	}, 30*time.Second, 200*time.Millisecond)
}

var alertnameMatcher = regexp.MustCompile(`^alertname\s*(=~|=)\s*"([^"]*)"$`)

// TestInhibitionsNameShippedAlerts: every alert name an inhibition rule of
// alertmanager.yml matches is an alert of alerts.yaml (a renamed alert
// would silently end its inhibition).
func TestInhibitionsNameShippedAlerts(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.FromSlash(alertmanagerPath))
	require.NoError(t, err)
	var cfg struct {
		InhibitRules []struct {
			SourceMatchers []string `yaml:"source_matchers"`
			TargetMatchers []string `yaml:"target_matchers"`
		} `yaml:"inhibit_rules"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	require.Len(t, cfg.InhibitRules, len(inhibitions))
	shipped := map[string]bool{}
	for _, a := range alerts(t) {
		shipped[a.Alert] = true
	}
	for i, r := range cfg.InhibitRules {
		for _, m := range append(r.SourceMatchers, r.TargetMatchers...) {
			sub := alertnameMatcher.FindStringSubmatch(m)
			if !assert.NotNil(t, sub, "inhibit rule %d: %s is no alertname matcher this test reads", i, m) {
				continue
			}
			for _, name := range strings.Split(sub[2], "|") {
				if !shipped[name] {
					t.Errorf("inhibit rule %d names %s, which is no alert of %s", i, name, alertsPath)
				}
			}
		}
	}
}
