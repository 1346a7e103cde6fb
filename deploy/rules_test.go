package deploy_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	alertsPath     = "prometheus/alerts.yaml"
	alertsTestPath = "prometheus/alerts_test.yaml"
	// docsDir holds the operators' documents: OPERATIONS.md (deploying,
	// scaling), DASHBOARD.md (the dashboard, panel by panel) and RUNBOOKS.md
	// (who is paged, and each alert); docsBase is their address on main.
	docsDir     = "../docs/"
	docsBase    = "https://github.com/meterline/meter-consumer/blob/main/docs/"
	runbooksDoc = "RUNBOOKS.md"
	// runbookAtRevision is an alert's runbook_url up to its anchor: the
	// docs of the revision the fleet runs, main when no replica says
	// (alerts_test.yaml renders both).
	runbookAtRevision = "https://github.com/meterline/meter-consumer/blob/" +
		`{{ with printf "meter_consumer_build_info{job='meter-consumer', namespace='%s', revision=~'[0-9a-f]{7,40}'}" $labels.namespace | query }}` +
		`{{ . | first | label "revision" }}{{ else }}main{{ end }}/docs/RUNBOOKS.md#`
)

func alerts(t *testing.T) []rule {
	t.Helper()
	var out []rule
	for _, g := range readRules(t, filepath.FromSlash(alertsPath)) {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// promtool runs promtool with args from the deploy directory, or skips the
// test when it is not installed (CI installs it: .ci/run).
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", filepath.FromSlash(alertsPath))
}

func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	out := promtool(t, "test", "rules", filepath.FromSlash(alertsTestPath))
	assert.Contains(t, out, "SUCCESS")
}

func TestPromtoolCheckConfig(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "config", filepath.FromSlash("prometheus/prometheus.yml"))
}

// TestAlertsAreTestedBothWays: alerts_test.yaml has, for every alert, a case
// where it fires and one where it does not.
func TestAlertsAreTestedBothWays(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.FromSlash(alertsTestPath))
	require.NoError(t, err)
	var file struct {
		Tests []struct {
			Name      string `yaml:"name"`
			AlertTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(data, &file))
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, at := range tc.AlertTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts(t) {
		assert.True(t, fires[a.Alert], "%s: no test where it fires", a.Alert)
		assert.True(t, quiet[a.Alert], "%s: no test where it does not fire", a.Alert)
	}
}

// TestAlertsCarryTheirRunbook: every alert has a severity, an owner, a
// summary, a description, a one-line runbook and a runbook_url whose anchor
// is a section of docs/RUNBOOKS.md, at the revision the fleet runs.
func TestAlertsCarryTheirRunbook(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(docsDir + runbooksDoc)
	require.NoError(t, err)
	anchors := markdownAnchors(string(doc))
	names := map[string]bool{}
	for _, a := range alerts(t) {
		assert.False(t, names[a.Alert], "%s twice", a.Alert)
		names[a.Alert] = true
		assert.Regexp(t, `^MeterConsumer[A-Z][A-Za-z]+$`, a.Alert)
		assert.Contains(t, []string{"critical", "warning"}, a.Labels["severity"], a.Alert)
		assert.Contains(t, []string{"meter-consumer", "head-end", "rate-engine", "nats"}, a.Labels["owner"], a.Alert)
		for _, k := range []string{"summary", "description", "runbook", "runbook_url"} {
			assert.NotEmpty(t, a.Annotations[k], "%s: annotation %s", a.Alert, k)
		}
		url := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookAtRevision)
		if assert.True(t, ok, "%s: runbook_url %s points into docs/RUNBOOKS.md of the revision running", a.Alert, url) {
			assert.Equal(t, strings.ToLower(a.Alert), anchor, a.Alert)
			assert.True(t, anchors[anchor], "%s: docs/RUNBOOKS.md has no section #%s", a.Alert, anchor)
		}
	}
}

var heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown document: lower case, punctuation dropped, spaces to hyphens.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

func TestMarkdownAnchors(t *testing.T) {
	t.Parallel()
	got := markdownAnchors("# Operations\n## Reading the dashboard\n```\n# not a heading\n```\n### MeterConsumerDown\n## Scale: KEDA, `MaxAckPending`\n")
	assert.Equal(t, map[string]bool{"operations": true, "reading-the-dashboard": true, "meterconsumerdown": true,
		"scale-keda-maxackpending": true}, got)
}

// TestAlertsSelectTheJob: every series of the consumer's, or recorded from
// them, that an alert selects is restricted to the job meter-consumer, so
// another job's metrics can neither fire nor hide it. An alert on KEDA's
// series selects the consumer's ScaledObjects instead, and one on
// kube-state-metrics' its pods or Deployments.
func TestAlertsSelectTheJob(t *testing.T) {
	t.Parallel()
	for _, a := range alerts(t) {
		if ks := kedaSelector.FindAllStringSubmatch(a.Expr, -1); len(ks) > 0 {
			for _, m := range ks {
				assert.Contains(t, m[2], `scaledObject=~"meter-consumer.*"`, "%s: %s", a.Alert, m[0])
			}
		}
		for _, m := range kubeSelector.FindAllStringSubmatch(a.Expr, -1) {
			assert.Regexp(t, `(pod=~"meter-consumer-\.\*"|deployment=~"meter-consumer\.\*")`, m[2], "%s: %s", a.Alert, m[0])
		}
		if kedaSelector.MatchString(a.Expr) || kubeSelector.MatchString(a.Expr) {
			for _, m := range consumerSelector.FindAllStringSubmatch(a.Expr, -1) {
				assert.Contains(t, m[2], `job="meter-consumer"`, "%s: %s", a.Alert, m[0])
			}
			continue
		}
		ms := append(consumerSelector.FindAllStringSubmatch(a.Expr, -1), recordedSelector.FindAllStringSubmatch(a.Expr, -1)...)
		require.NotEmpty(t, ms, a.Alert)
		for _, m := range ms {
			assert.Contains(t, m[2], `job="meter-consumer"`, "%s: %s", a.Alert, m[0])
		}
	}
}

var (
	recordedSelector = regexp.MustCompile(`\b(meter_consumer:[a-z0-9_:]+)(\{[^}]*\})?`)
	kedaSelector     = regexp.MustCompile(`\b(keda_[a-z0-9_]+)(\{[^}]*\})?`)
	kubeSelector     = regexp.MustCompile(`\b(kube_[a-z0-9_]+)(\{[^}]*\})?`)
)

var (
	labelClause = regexp.MustCompile(`\b(by|on|without|ignoring)\s*\(([^)]*)\)`)
	bareAggr    = regexp.MustCompile(`\b(sum|min|max|avg|group|count|stddev|stdvar|topk|bottomk|quantile)\s*\(`)
)

// TestAlertsAggregateByNamespace: every aggregation and every vector match
// of every alert keeps namespace and job, so that with several namespaces in
// one Prometheus each alerts on its own (one going down while another stays
// up fires for the one).
func TestAlertsAggregateByNamespace(t *testing.T) {
	t.Parallel()
	for _, a := range alerts(t) {
		assert.Empty(t, bareAggr.FindAllString(a.Expr, -1), "%s: an aggregation without by () drops the namespace", a.Alert)
		for _, m := range labelClause.FindAllStringSubmatch(a.Expr, -1) {
			if !assert.Contains(t, []string{"by", "on"}, m[1], "%s: %s", a.Alert, m[0]) {
				continue
			}
			var names []string
			for n := range strings.SplitSeq(m[2], ",") {
				names = append(names, strings.TrimSpace(n))
			}
			assert.Subset(t, names, []string{"namespace", "job"}, "%s: %s", a.Alert, m[0])
		}
	}
}

// TestPrometheusRuleMatchesAlerts: the PrometheusRule for the operator holds
// exactly the groups of alerts.yaml.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	t.Parallel()
	m := load(t)
	want := readRules(t, filepath.FromSlash(alertsPath))
	assert.Equal(t, want, m.rule.Spec.Groups)
	// and it is the same text, indented, so a diff shows what drifted
	data, err := os.ReadFile(filepath.FromSlash(alertsPath))
	require.NoError(t, err)
	groups := data[bytes.Index(data, []byte("groups:")):]
	cr, err := os.ReadFile(filepath.Join(k8sDir, "prometheusrule.yaml"))
	require.NoError(t, err)
	var indented strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(string(groups), "\n"), "\n") {
		if line != "" {
			indented.WriteString("  " + line)
		}
		indented.WriteString("\n")
	}
	assert.True(t, strings.HasSuffix(string(cr), "spec:\n"+indented.String()),
		"prometheusrule.yaml must end with alerts.yaml's groups indented under spec:")
}

// TestOperatorDocsLinks: the operators' documents' links to their own
// sections and to each other's, and the dashboard's links to them, point
// at sections that exist.
func TestOperatorDocsLinks(t *testing.T) {
	t.Parallel()
	docs := []string{"OPERATIONS.md", "DASHBOARD.md", runbooksDoc}
	anchors := map[string]map[string]bool{}
	texts := map[string]string{}
	for _, name := range docs {
		doc, err := os.ReadFile(docsDir + name)
		require.NoError(t, err)
		texts[name], anchors[name] = string(doc), markdownAnchors(string(doc))
	}
	link := regexp.MustCompile(`\]\(((?:OPERATIONS|DASHBOARD|RUNBOOKS)\.md)?#([^)]+)\)`)
	for _, name := range docs {
		links := link.FindAllStringSubmatch(texts[name], -1)
		for _, l := range links {
			target := cmp.Or(l[1], name)
			assert.True(t, anchors[target][l[2]], "docs/%s links to %s#%s, which is no section", name, target, l[2])
		}
	}
	data, err := os.ReadFile(filepath.FromSlash(dashboardPath))
	require.NoError(t, err)
	var d struct {
		Links []struct{ URL string }
	}
	require.NoError(t, json.Unmarshal(data, &d))
	require.NotEmpty(t, d.Links)
	for _, l := range d.Links {
		rest, ok := strings.CutPrefix(l.URL, docsBase)
		name, anchor, _ := strings.Cut(rest, "#")
		if assert.True(t, ok && anchors[name] != nil, "%s: not one of the operators' documents", l.URL) {
			assert.True(t, anchors[name][anchor], "the dashboard links to %s#%s, which is no section", name, anchor)
		}
	}
}
