package deploy_test

import (
	"fmt"
	"maps"
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
	yaml "go.yaml.in/yaml/v3"
)

// firing is an alert the replay expects: with labels (besides namespace,
// job, and the rule's severity and owner), firing from minute from until
// minute to (resolved at to; 0: still firing at the end).
type firing struct {
	alert    string
	labels   map[string]string
	from, to int
}

// situation is one replay: a fleet (or two partitions) in a world that
// changes by the minute, the alerts Prometheus fires and the ones
// Alertmanager notifies once its inhibitions are applied.
type situation struct {
	name    string
	minutes int
	fleets  []fleetID
	world   func(m int, f fleetID) world
	want    []firing
	notify  []string // alerts notified (firing and not inhibited) at some minute
}

func of(f fleetID) map[string]string {
	return map[string]string{"stream": f.stream, "durable": f.durable}
}

// TestReplaySituations replays, in promtool on the shipped rules, each
// situation of issue 37 on a model of a two-replica fleet whose series are
// the binary's (TestReplayModelSeriesAreExported): which alert fires, at
// which minute, when it resolves, and which of them Alertmanager notifies
// (deploy/alertmanager's inhibitions). Every alert is checked at every
// minute, so an alert not listed must not fire at all. Annotations are
// alerts_test.yaml's to check; here they are left out.
func TestReplaySituations(t *testing.T) {
	t.Parallel()
	rules := rulesWithoutAnnotations(t)
	owners := map[string][2]string{}
	var names []string
	for _, a := range alerts(t) {
		owners[a.Alert] = [2]string{a.Labels["severity"], a.Labels["owner"]}
		names = append(names, a.Alert)
	}
	inhibit := amInhibitions(t)
	var tests []any
	for _, s := range situations() {
		tests = append(tests, s.promtoolTest(names, owners))
		t.Run(s.name+"/notified", func(t *testing.T) {
			assert.ElementsMatch(t, s.notify, s.notified(inhibit), "the alerts Alertmanager notifies")
		})
		t.Logf("%s:\n%s", s.name, s.timeline(inhibit))
	}
	dir := t.TempDir()
	// Prometheus evaluates rule groups independently, so an alert reading a
	// recorded ratio (MeterConsumerBillingSLOBurn) sees it either from this
	// minute or from the one before; promtool, given no order, draws one at
	// random per test, and the replay failed one run in three. The order is
	// pinned: the alerts first, reading the ratios of the minute before,
	// which is the later of the two firings a real server can give.
	data, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"group_eval_order":    []string{"meter-consumer", "meter-consumer-slo"},
		"tests":               tests,
	})
	require.NoError(t, err)
	file := filepath.Join(dir, "replay_test.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	out := promtoolResult(t, "test", "rules", file)
	if out != "" {
		saw := promtoolSaw(out)
		if len(out) > 6000 {
			out = out[:6000] + "\n…"
		}
		t.Errorf("promtool disagrees with the expected timelines; where they differ, it saw:\n%s\npromtool's output:\n%s", saw, out)
	}
}

// promtoolResult runs promtool (skipping when it is not installed) and
// returns its output when it fails, "" when it passes.
func promtoolResult(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return string(out)
	}
	return ""
}

// rulesWithoutAnnotations writes alerts.yaml without its annotations.
func rulesWithoutAnnotations(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(alertsPath))
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, yaml.Unmarshal(data, &file))
	for _, g := range file["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			delete(r.(map[string]any), "annotations")
		}
	}
	out, err := yaml.Marshal(file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "alerts.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// fullLabels is an expected alert's label set as Prometheus gives it.
func (f firing) fullLabels(owners map[string][2]string) map[string]string {
	l := map[string]string{"namespace": "billing", "job": "meter-consumer",
		"severity": owners[f.alert][0], "owner": owners[f.alert][1]}
	maps.Copy(l, f.labels)
	return l
}

func (f firing) at(m int) bool { return m >= f.from && (f.to == 0 || m < f.to) }

// promtoolTest is the situation as one promtool test: its series, and every
// alert checked at every minute.
func (s situation) promtoolTest(names []string, owners map[string][2]string) map[string]any {
	var series []map[string]string
	for _, id := range s.fleets {
		fm := newFleetModel(id)
		for m := range s.minutes {
			fm.step(s.world(m, id))
		}
		for _, k := range slices.Sorted(maps.Keys(fm.series)) {
			series = append(series, map[string]string{"series": k, "values": strings.Join(fm.series[k], " ")})
		}
	}
	var checks []map[string]any
	for m := 1; m < s.minutes; m++ {
		for _, n := range names {
			exp := []map[string]any{}
			for _, f := range s.want {
				if f.alert == n && f.at(m) {
					exp = append(exp, map[string]any{"exp_labels": f.fullLabels(owners)})
				}
			}
			checks = append(checks, map[string]any{"eval_time": fmt.Sprintf("%dm", m), "alertname": n, "exp_alerts": exp})
		}
	}
	return map[string]any{"name": s.name, "interval": "1m", "input_series": series, "alert_rule_test": checks}
}

// inhibition is one of Alertmanager's inhibit rules.
type inhibition struct {
	source, target []matcher
	equal          []string
}

type matcher struct {
	name string
	re   *regexp.Regexp
}

func (i inhibition) matches(ms []matcher, l map[string]string) bool {
	for _, m := range ms {
		if !m.re.MatchString(l[m.name]) {
			return false
		}
	}
	return true
}

var matcherText = regexp.MustCompile(`^\s*([a-zA-Z_]+)\s*(=~|=)\s*"(.*)"\s*$`)

// amInhibitions reads deploy/alertmanager's inhibit rules.
func amInhibitions(t *testing.T) []inhibition {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash("alertmanager/alertmanager.yml"))
	require.NoError(t, err)
	var cfg struct {
		Inhibit []struct {
			Source []string `yaml:"source_matchers"`
			Target []string `yaml:"target_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	parse := func(ss []string) []matcher {
		var out []matcher
		for _, s := range ss {
			m := matcherText.FindStringSubmatch(s)
			require.NotNil(t, m, "matcher %q", s)
			v := m[3]
			if m[2] == "=" {
				v = regexp.QuoteMeta(v)
			}
			out = append(out, matcher{m[1], regexp.MustCompile("^(?:" + strings.Join(strings.Fields(v), "") + ")$")})
		}
		return out
	}
	var out []inhibition
	for _, r := range cfg.Inhibit {
		out = append(out, inhibition{parse(r.Source), parse(r.Target), r.Equal})
	}
	require.NotEmpty(t, out)
	return out
}

// inhibited says whether alert f is muted at minute m by another of the
// situation's alerts firing then.
func (s situation) inhibited(f firing, m int, rules []inhibition) bool {
	lf := f.fullLabels(nil)
	lf["alertname"] = f.alert
	for _, src := range s.want {
		if !src.at(m) || src.alert == f.alert {
			continue
		}
		ls := src.fullLabels(nil)
		ls["alertname"] = src.alert
		for _, r := range rules {
			if r.matches(r.source, ls) && r.matches(r.target, lf) &&
				!slices.ContainsFunc(r.equal, func(k string) bool { return ls[k] != lf[k] }) {
				return true
			}
		}
	}
	return false
}

// notified lists the alerts that fire, not inhibited, at some minute.
func (s situation) notified(rules []inhibition) []string {
	out := []string{}
	for _, f := range s.want {
		for m := f.from; m < s.minutes && f.at(m); m++ {
			if !s.inhibited(f, m, rules) {
				if !slices.Contains(out, f.alert) {
					out = append(out, f.alert)
				}
				break
			}
		}
	}
	return out
}

// timeline is the situation's expected alerts as a table for the log.
func (s situation) timeline(rules []inhibition) string {
	var b strings.Builder
	for _, f := range s.want {
		to := "still firing"
		if f.to != 0 {
			to = fmt.Sprintf("resolved at %dm", f.to)
		}
		note := ""
		if !slices.Contains(s.notified(rules), f.alert) {
			note = " (inhibited)"
		}
		fmt.Fprintf(&b, "  %-36s %v fires at %dm, %s%s\n", f.alert, f.labels, f.from, to, note)
	}
	if len(s.want) == 0 {
		b.WriteString("  nothing fires\n")
	}
	return b.String()
}

var (
	sawCheck  = regexp.MustCompile(`alertname: (\w+), time: ([0-9hms]+),`)
	sawName   = regexp.MustCompile(`(?m)^\s*name: (.*),\s*$`)
	sawLabels = regexp.MustCompile(`Labels:\{([^}]*)\}`)
	sawCommon = regexp.MustCompile(`(namespace="billing"|job="meter-consumer"|alertname=)(, )?`)
)

// promtoolSaw condenses promtool's failures into the minutes at which each
// alert it got was firing, by situation, where they differ from the
// expected.
func promtoolSaw(out string) string {
	seen := map[string][]int{}
	name := ""
	for _, block := range strings.Split(out, "alertname: ") {
		m := sawCheck.FindStringSubmatch("alertname: " + block)
		testName := name
		// a block ends with the name of the test the next one is of
		if n := sawName.FindAllStringSubmatch(block, -1); n != nil {
			name = n[len(n)-1][1]
		}
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			continue
		}
		_, got, ok := strings.Cut(block, "got:")
		if !ok {
			continue
		}
		for _, l := range sawLabels.FindAllStringSubmatch(got, -1) {
			k := testName + ": " + sawCommon.ReplaceAllString(l[1], "")
			seen[k] = append(seen[k], int(d.Minutes()))
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		ms := slices.Compact(slices.Sorted(slices.Values(seen[k])))
		fmt.Fprintf(&b, "  %s: %dm to %dm (%d minutes)\n", k, ms[0], ms[len(ms)-1], len(ms))
	}
	return b.String()
}

// TestReplayModelSeriesAreExported: every series the model of the fleet
// writes is one the binary exports, Prometheus makes (up) or an alert reads
// from KEDA or kube-state-metrics, so the replay runs on real names.
func TestReplayModelSeriesAreExported(t *testing.T) {
	t.Parallel()
	exported := exportedNames(t)
	seen := map[string]bool{}
	for _, s := range situations() {
		for _, id := range s.fleets {
			fm := newFleetModel(id)
			for m := range s.minutes {
				fm.step(s.world(m, id))
			}
			for k := range fm.series {
				seen[k[:strings.Index(k, "{")]] = true
			}
		}
	}
	require.NotEmpty(t, seen)
	for n := range seen {
		assert.True(t, exported[n] || scrapeSeries[n] || externalSeries[n], "the model writes %s, which nothing exports", n)
	}
}
