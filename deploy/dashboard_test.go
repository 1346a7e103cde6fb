package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dashboardPath = "grafana/meter-consumer.json"

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *dsRef `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		Datasource   *dsRef `json:"datasource"`
		Format       string `json:"format"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit     string `json:"unit"`
			Mappings []struct {
				Type    string `json:"type"`
				Options map[string]struct {
					Text string `json:"text"`
				} `json:"options"`
			} `json:"mappings"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type dashboard struct {
	ID            *int   `json:"id"`
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Datasource *dsRef `json:"datasource"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// allPanels returns the panels that show data (rows left out, collapsed
// rows' panels included).
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(dashboardPath))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(data, &d))
	return d
}

// TestDashboardImportable: the JSON is a dashboard Grafana imports as is:
// no id, a fixed uid, a datasource variable every panel and query uses, and
// namespace, job and pod variables.
func TestDashboardImportable(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	assert.Nil(t, d.ID, "an imported dashboard gets its id from Grafana")
	assert.Equal(t, "meter-consumer", d.UID)
	assert.NotEmpty(t, d.Title)
	assert.GreaterOrEqual(t, d.SchemaVersion, 36, "datasource references by uid")

	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	require.Contains(t, vars, "datasource")
	ds := d.Templating.List[vars["datasource"]]
	assert.Equal(t, "datasource", ds.Type)
	assert.Equal(t, "prometheus", ds.Query)
	for _, name := range []string{"namespace", "job", "pod"} {
		require.Contains(t, vars, name)
		v := d.Templating.List[vars[name]]
		assert.Equal(t, "query", v.Type, name)
		require.NotNil(t, v.Datasource, name)
		assert.Equal(t, "${datasource}", v.Datasource.UID, name)
		_, ok := labelValuesSelector(v.Query)
		assert.True(t, ok, "%s: %v", name, v.Query)
	}
	assert.Less(t, vars["namespace"], vars["job"], "the job list depends on the namespace")
	assert.Less(t, vars["job"], vars["pod"], "the pod list depends on the job")
	pod := d.Templating.List[vars["pod"]]
	assert.True(t, pod.Multi && pod.IncludeAll, "pod: several replicas or all")
	assert.Equal(t, ".*", pod.AllValue)
	ns := d.Templating.List[vars["namespace"]]
	assert.False(t, ns.Multi || ns.IncludeAll, "namespace: one at a time, the backlog gauges are per namespace")

	ids := map[int]bool{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		assert.True(t, p.GridPos.X >= 0 && p.GridPos.W > 0 && p.GridPos.X+p.GridPos.W <= 24, "%s: inside the 24 columns", p.Title)
	}
	for _, p := range d.allPanels() {
		assert.False(t, titles[p.Title], "panel title %q twice", p.Title)
		titles[p.Title] = true
		assert.NotEmpty(t, p.Description, "%s: say what the panel shows", p.Title)
		require.NotNil(t, p.Datasource, p.Title)
		assert.Equal(t, dsRef{"prometheus", "${datasource}"}, *p.Datasource, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			assert.NotEmpty(t, tg.Expr, p.Title)
			assert.False(t, refs[tg.RefID], "%s: refId %s twice", p.Title, tg.RefID)
			refs[tg.RefID] = true
			require.NotNil(t, tg.Datasource, p.Title)
			assert.Equal(t, "${datasource}", tg.Datasource.UID, p.Title)
		}
	}
	assertNoOverlap(t, d.Panels)
}

func assertNoOverlap(t *testing.T, ps []panel) {
	t.Helper()
	for i, a := range ps {
		for _, b := range ps[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %q and %q overlap", a.Title, b.Title)
			}
		}
	}
}

var consumerSelector = regexp.MustCompile(`\b((?:meter_consumer|process|go)_[a-z0-9_]+|up)\b(\{[^}]*\})?`)

var aggregated = regexp.MustCompile(`\b(sum|min|max|avg|group|count)\s*(by|without|\()`)

// TestDashboardFiltersByNamespaceJobAndPod: every series the dashboard
// selects is filtered by the namespace, job and pod variables, and every
// per-replica series is told apart by its pod.
func TestDashboardFiltersByNamespaceJobAndPod(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			for _, m := range consumerSelector.FindAllStringSubmatch(tg.Expr, -1) {
				assert.Contains(t, m[2], `namespace="$namespace"`, "%s: %s", p.Title, m[0])
				assert.Contains(t, m[2], `job="$job"`, "%s: %s", p.Title, m[0])
				assert.Contains(t, m[2], `pod=~"$pod"`, "%s: %s", p.Title, m[0])
			}
			assert.NotContains(t, tg.Expr, "instance", "%s: replicas are pods", p.Title)
			assert.NotContains(t, tg.LegendFormat, "instance", "%s: replicas are pods", p.Title)
			if strings.Contains(tg.Expr, "by (pod") || !aggregated.MatchString(tg.Expr) {
				assert.Equal(t, "{{pod}}", tg.LegendFormat, "%s %s: one series per pod: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
}

// TestDashboardPanels: the panels the operations guide describes are there,
// each on the metric it is about.
func TestDashboardPanels(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	byTitle := map[string]panel{}
	for _, p := range d.allPanels() {
		byTitle[p.Title] = p
	}
	want := []struct {
		title, typ string
		exprs      []string // each must appear in one of the panel's queries
	}{
		{"Throughput by outcome", "timeseries", []string{"rate(meter_consumer_messages_total{", "by (outcome)"}},
		{"Failure causes", "timeseries", []string{"meter_consumer_failures_total{", "by (class, cause)"}},
		{"Retry delay", "heatmap", []string{"meter_consumer_retry_delay_seconds_bucket{", "by (le)"}},
		{"Delivery attempt at settlement", "bargauge", []string{"meter_consumer_delivery_attempt_bucket{", "by (le)"}},
		{"Dead letters by reason", "timeseries", []string{"meter_consumer_dead_letters_total{", "by (reason)"}},
		{"In flight", "timeseries", []string{"meter_consumer_in_flight{"}},
		{"Reads held for a retry", "timeseries", []string{"meter_consumer_retry_held{"}},
		{"Breaker state by replica", "state-timeline", []string{"meter_consumer_breaker_state{", "by (pod)"}},
		{"Breaker transitions", "timeseries", []string{"meter_consumer_breaker_transitions_total{", "by (to)"}},
		{"Backlog", "timeseries", []string{"meter_consumer_pending_messages{", "meter_consumer_ack_pending_messages{", "meter_consumer_max_ack_pending{"}},
		{"Backlog trend", "timeseries", []string{"deriv(meter_consumer_pending_messages{"}},
		{"Dead-letter stream size", "timeseries", []string{"meter_consumer_dead_letter_stream_messages{"}},
		{"Handle duration percentiles", "timeseries", []string{"histogram_quantile(0.5,", "histogram_quantile(0.9,", "histogram_quantile(0.99,", "meter_consumer_handle_duration_seconds_bucket{"}},
		{"Dead-letter publish errors and rejections", "timeseries", []string{"meter_consumer_dead_letter_publish_errors_total{", "meter_consumer_dead_letter_rejections_total{"}},
		{"Settle errors, hand-backs and record errors", "timeseries", []string{"meter_consumer_settle_errors_total{", "by (op)", "meter_consumer_hand_backs_total{", "meter_consumer_record_errors_total{"}},
		{"Throughput by replica", "timeseries", []string{"by (pod)"}},
		{"Ack pending", "stat", []string{"meter_consumer_ack_pending_messages{", "/ max by (stream, durable) (meter_consumer_max_ack_pending{"}},
		{"Oldest unsettled read", "timeseries", []string{"meter_consumer_oldest_unacked_age_seconds{", "meter_consumer_stream_max_age_seconds{"}},
		{"Stream usage", "timeseries", []string{"meter_consumer_stream_messages{", "meter_consumer_stream_max_messages{", "meter_consumer_stream_bytes{", "meter_consumer_stream_max_bytes{"}},
		{"Resident memory by replica", "timeseries", []string{"process_resident_memory_bytes{"}},
		{"Concurrency limit by replica", "timeseries", []string{"meter_consumer_concurrency_limit{", "by (pod)"}},
		{"Calls shed by the engine", "timeseries", []string{"meter_consumer_downstream_rejected_total{", "by (cause)"}},
		{"Retries spent and denied", "timeseries", []string{"meter_consumer_retries_total{", "by (budget)"}},
		{"Replicas consuming", "stat", []string{"sum by (stream, durable) (meter_consumer_consuming{", "count(meter_consumer_build_info{"}},
		{"Versions running", "stat", []string{"count by (version) (meter_consumer_build_info{"}},
	}
	for _, w := range want {
		p, ok := byTitle[w.title]
		if !assert.True(t, ok, "no panel %q", w.title) {
			continue
		}
		assert.Equal(t, w.typ, p.Type, w.title)
		var all strings.Builder
		for _, tg := range p.Targets {
			all.WriteString(tg.Expr + "\n")
		}
		for _, e := range w.exprs {
			assert.Contains(t, all.String(), e, w.title)
		}
	}
	for _, title := range []string{"Retry delay", "Delivery attempt at settlement"} {
		for _, tg := range byTitle[title].Targets {
			assert.Equal(t, "heatmap", tg.Format, "%s: buckets shown as a distribution, not cumulative", title)
		}
	}
	breaker := byTitle["Breaker state by replica"]
	require.Len(t, breaker.FieldConfig.Defaults.Mappings, 1)
	texts := map[string]string{}
	for k, v := range breaker.FieldConfig.Defaults.Mappings[0].Options {
		texts[k] = v.Text
	}
	assert.Equal(t, map[string]string{"0": "closed", "1": "open", "2": "half-open"}, texts)
}

// TestDashboardTellsFleetsApart: the fleet-wide gauges (a durable's
// backlog, a stream's size and limits) are taken with max per stream and
// durable, never across them: with one fleet per partition in a namespace,
// a bare max would show the largest partition's backlog as the only one.
// KEDA's series tell fleets apart by their ScaledObject.
func TestDashboardTellsFleetsApart(t *testing.T) {
	t.Parallel()
	maxBy := regexp.MustCompile(`\bmax\s*(?:by\s*\(([^)]*)\))?\s*\(`)
	n := 0
	for _, p := range readDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			for _, m := range maxBy.FindAllStringSubmatch(tg.Expr, -1) {
				n++
				if strings.Contains(m[1], "pod") {
					continue // per replica
				}
				if strings.Contains(tg.Expr, "keda_") { // KEDA's: a fleet is its ScaledObject
					assert.Contains(t, m[1], "scaledObject", "%s: %s", p.Title, tg.Expr)
					assert.Contains(t, tg.LegendFormat, "{{scaledObject}}", "%s: the legend names the fleet", p.Title)
					continue
				}
				assert.Contains(t, m[1], "stream", "%s: %s", p.Title, tg.Expr)
				assert.Contains(t, m[1], "durable", "%s: %s", p.Title, tg.Expr)
				assert.Contains(t, tg.LegendFormat, "{{stream}}", "%s: the legend names the fleet", p.Title)
			}
		}
	}
	assert.Greater(t, n, 10)
}

// TestDashboardVariablesListEveryReplica: the namespace, job and pod lists
// come from meter_consumer_build_info, exported from process start, so a
// namespace whose replicas never consumed is listed (messages_total, say,
// appears with the first settled read); no panel counts replicas by up,
// which counts unready ones.
func TestDashboardVariablesListEveryReplica(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	for _, name := range []string{"namespace", "job", "pod"} {
		sel := dashboardVar(t, d, name)
		assert.Equal(t, []string{"meter_consumer_build_info"}, metricNames(sel), name)
		if name != "namespace" {
			assert.Contains(t, sel, `namespace="$namespace"`, name)
		}
		if name == "pod" {
			assert.Contains(t, sel, `job="$job"`, name)
		}
	}
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			assert.NotContains(t, metricNames(tg.Expr), "up", "%s: up counts replicas that are not ready", p.Title)
		}
	}
}
