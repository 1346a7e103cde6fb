package deploy_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/version"
)

// noSource is a lag.Source whose one answer is the records bucket found:
// exportedNames takes one reading, so that the series a reading alone makes
// (records_bucket_present) are exported too; its other requests fail.
type noSource struct{}

func (noSource) ConsumerInfo(context.Context) (*jetstream.ConsumerInfo, error) {
	return nil, errors.New("not read")
}

func (noSource) StreamInfo(context.Context) (*jetstream.StreamInfo, error) {
	return nil, errors.New("not read")
}

func (noSource) GetMsg(context.Context, uint64, string) (*jetstream.RawStreamMsg, error) {
	return nil, errors.New("not read")
}

func (noSource) DeadLetterInfo(context.Context) (*jetstream.StreamInfo, error) {
	return nil, errors.New("not read")
}

func (noSource) OldestCopy(context.Context, uint64) (*jetstream.RawStreamMsg, error) {
	return nil, errors.New("not read")
}

func (noSource) RecordsBucket(context.Context) error { return nil }

func (noSource) Names() lag.Names { return lag.Names{} }

// exportedNames registers the metrics the binary registers (cmd/consumer:
// the Go and process collectors, build info; internal/service: its own, its state's,
// the stream metrics and the lag reader's gauges, after one reading) and returns every series name they expose:
// histograms as _bucket, _sum and _count, summaries as the name, _sum and
// _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stream.NewMetrics(reg)
	service.NewMetrics(reg)
	service.NewStateMetrics(reg)
	_ = lag.New(noSource{}, reg, time.Minute, retry.NewRand(1), nil).Read(t.Context()) // its errors are noSource's
	require.NoError(t, version.Register(reg, version.Get()))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[n], names[n+"_sum"], names[n+"_count"] = true, true, true
		default:
			names[n] = true
		}
	}
	require.True(t, names["meter_consumer_messages_total"], "the stream metrics are registered")
	require.True(t, names["meter_consumer_pending_messages"], "the lag gauges are registered")
	require.True(t, names["meter_consumer_records_bucket_present"], "the series of a reading are made")
	require.True(t, names["process_resident_memory_bytes"], "the process collector is registered")
	require.True(t, names["meter_consumer_build_info"], "the build info is registered")
	return names
}

// Series Prometheus itself makes for every target.
var scrapeSeries = map[string]bool{"up": true}

// externalSeries are the series of other programs an alert uses: KEDA's
// operator (v2.20, pkg/metricscollector/prommetrics.go; its
// keda_scaler_errors_total went in v2.17) and kube-state-metrics' (v2).
var externalSeries = map[string]bool{
	"keda_scaler_detail_errors_total":          true,
	"keda_scaler_metrics_value":                true,
	"kube_pod_container_status_restarts_total": true,
	"kube_deployment_status_condition":         true,
}

var (
	promStrings = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promComment = regexp.MustCompile(`(?m)#.*$`)
	promBraces  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges  = regexp.MustCompile(`\[[^\[\]]*\]`)
	promToken   = regexp.MustCompile(`[0-9][0-9A-Za-z_.]*|[A-Za-z_:][A-Za-z0-9_:]*|\S`)
	// Keywords and aggregation operators: identifiers that are not metric
	// names even when not followed by "(".
	promKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true, "offset": true, "bool": true, "inf": true, "nan": true, "atan2": true,
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
		"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
		"start": true, "end": true,
	}
	// Keywords followed by a parenthesised list of label names.
	promLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// metricNames returns every metric name a PromQL expression selects: the
// identifiers left once strings, comments, label matchers, ranges, numbers,
// durations, keywords, label lists and function calls are taken out. Any name
// at all is found, not only those with a known prefix, so a misspelt name
// cannot hide.
func metricNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promComment.ReplaceAllString(s, "")
	s = promBraces.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	toks := promToken.FindAllString(s, -1)
	var names []string
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok[0] >= '0' && tok[0] <= '9': // a number or a duration
		case !isIdent(tok):
		case promLabelLists[tok] && next == "(":
			for i < len(toks) && toks[i] != ")" {
				i++
			}
		case promKeywords[tok]:
		case next == "(": // a function call
		default:
			names = append(names, tok)
		}
	}
	return names
}

func isIdent(s string) bool {
	c := s[0]
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func TestMetricNamesLexer(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`sum by (outcome) (rate(meter_consumer_messages_total{job="$job", outcome=~"nak|ack"}[$__rate_interval]))`: {"meter_consumer_messages_total"},
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m]))) > 1e3`:                                         {"a_bucket"},
		`sum by (job) (up{job="x"}) == 0 or absent(b{job="x"}) and on (job) c offset 5m`:                           {"up", "b", "c"},
		`max(deriv(g[15m:1m])) / ignoring(instance) group_left(pod) h # comment d`:                                 {"g", "h"},
		`count_values("le", x) + sum without (instance) (y) + topk(3, z)`:                                          {"x", "y", "z"},
		`min_over_time(meter_consumer_breaker_state{job="meter-consumer"}[10m]) > 0`:                               {"meter_consumer_breaker_state"},
		`meter_consmer_typo + upp`: {"meter_consmer_typo", "upp"},
	} {
		assert.Equal(t, want, metricNames(expr), expr)
	}
}

// expressions are every PromQL expression the deployment ships: the
// dashboard's queries and variable queries, and the rules' expressions.
type expression struct{ where, expr string }

func dashboardExpressions(t *testing.T) []expression {
	t.Helper()
	d := readDashboard(t)
	var out []expression
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, expression{"dashboard panel " + p.Title + " " + tg.RefID, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := labelValuesSelector(v.Query)
		require.True(t, ok, "variable %s: label_values(selector, label) expected, got %q", v.Name, v.Query)
		out = append(out, expression{"dashboard variable " + v.Name, q})
	}
	return out
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// labelValuesSelector returns the series selector of a Grafana
// label_values(selector, label) variable query.
func labelValuesSelector(q any) (string, bool) {
	s, ok := q.(string)
	if !ok {
		return "", false
	}
	m := labelValues.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}

func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("prometheus", "*.yaml"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.yaml") {
			out = append(out, f)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// readRules reads a rule file strictly.
func readRules(t *testing.T, path string) []ruleGroup {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var file struct {
		Groups []ruleGroup `yaml:"groups"`
	}
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&file), path)
	return file.Groups
}

func ruleExpressions(t *testing.T) (exprs []expression, recorded []string) {
	t.Helper()
	for _, f := range ruleFiles(t) {
		for _, g := range readRules(t, f) {
			for _, r := range g.Rules {
				name := r.Alert
				if r.Record != "" {
					name = r.Record
					recorded = append(recorded, r.Record)
				}
				exprs = append(exprs, expression{f + " " + name, r.Expr})
			}
		}
	}
	return exprs, recorded
}

// TestEveryReferencedMetricIsExported: the dashboard and the rules name only
// series the consumer exports (or up, or a recording rule's output), so a
// renamed or misspelt metric fails here instead of showing an empty panel or
// an alert that can never fire.
func TestEveryReferencedMetricIsExported(t *testing.T) {
	t.Parallel()
	exported := exportedNames(t)
	rules, recorded := ruleExpressions(t)
	for _, r := range recorded {
		exported[r] = true
	}
	used := map[string]bool{}
	all := append(dashboardExpressions(t), rules...)
	require.Greater(t, len(all), 20)
	for _, e := range all {
		names := metricNames(e.expr)
		assert.NotEmpty(t, names, "%s: no metric found in %q", e.where, e.expr)
		for _, n := range names {
			used[n] = true
			if !exported[n] && !scrapeSeries[n] && !externalSeries[n] {
				t.Errorf("%s: %s is not exported by the consumer (expr %q)", e.where, n, e.expr)
			}
		}
	}
	// The brief's regexp check, on top: every prefixed name in the raw text.
	prefixed := regexp.MustCompile(`\b(?:meter_consumer|go|process)_[a-z0-9_]+\b`)
	for _, e := range all {
		for _, n := range prefixed.FindAllString(promStrings.ReplaceAllString(e.expr, `""`), -1) {
			assert.True(t, exported[n], "%s: %s is not exported", e.where, n)
		}
	}
	var unused []string
	for n := range exported {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(n, "meter_consumer_") && !used[n] && !used[base+"_bucket"] {
			unused = append(unused, n)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		t.Logf("consumer metrics on no panel and in no rule: %v", unused)
	}
	t.Logf("%d expressions, %d distinct metrics: %v", len(all), len(used), slices.Sorted(maps.Keys(used)))
}
