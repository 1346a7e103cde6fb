package deploy_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardVar returns the selector of the dashboard variable name's
// label_values query.
func dashboardVar(t *testing.T, d dashboard, name string) string {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Name == name {
			sel, ok := labelValuesSelector(v.Query)
			require.True(t, ok, "variable %s: %v", name, v.Query)
			return sel
		}
	}
	t.Fatalf("no variable %s", name)
	return ""
}

// dashboardExpr returns the query refID of the panel titled title.
func dashboardExpr(t *testing.T, d dashboard, title, refID string) string {
	t.Helper()
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			if p.Title == title && tg.RefID == refID {
				return tg.Expr
			}
		}
	}
	t.Fatalf("no query %s in panel %q", refID, title)
	return ""
}

// promResult is a Prometheus API answer: label values or an instant
// vector.
type promResult struct {
	Status string
	Data   json.RawMessage
}

// promGet asks the Prometheus API at api for path with the query q.
func promGet(t *testing.T, api, path string, q url.Values, out any) bool {
	t.Helper()
	code, body := get(t, api+path+"?"+q.Encode())
	var r promResult
	if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || r.Status != "success" {
		return false
	}
	return json.Unmarshal(r.Data, out) == nil
}

// assertDashboardShowsBrokenReplica runs the dashboard's variable queries
// and its replica panels against the real Prometheus at api, which scrapes
// one replica (namespace, job, pod) that never reached NATS: the variables
// list it, Replicas consuming counts 0 of its fleet and 1 running, Versions
// running shows its version.
func assertDashboardShowsBrokenReplica(t *testing.T, api, namespace, job, pod string) {
	t.Helper()
	d := readDashboard(t)
	expand := strings.NewReplacer("$namespace", namespace, "$job", job, "$pod", ".*", "$__rate_interval", "1m")
	for _, v := range []struct{ name, want string }{{"namespace", namespace}, {"job", job}, {"pod", pod}} {
		sel := expand.Replace(dashboardVar(t, d, v.name))
		var got []string
		require.Eventually(t, func() bool {
			return promGet(t, api, "label/"+v.name+"/values", url.Values{"match[]": {sel}}, &got) && len(got) > 0
		}, 30*time.Second, 250*time.Millisecond, "variable %s (%s) lists nothing", v.name, sel)
		assert.Equal(t, []string{v.want}, got, "variable %s", v.name)
	}

	type sample struct {
		Metric map[string]string
		Value  [2]any
	}
	query := func(expr string) []sample {
		var v struct{ Result []sample }
		require.True(t, promGet(t, api, "query", url.Values{"query": {expand.Replace(expr)}}, &v), expr)
		return v.Result
	}
	consuming := query(dashboardExpr(t, d, "Replicas consuming", "A"))
	require.Len(t, consuming, 1, "one fleet")
	assert.Equal(t, map[string]string{"stream": "METER_READS", "durable": "meter-consumer"}, consuming[0].Metric)
	assert.Equal(t, "0", consuming[0].Value[1], "the replica is up and not ready: not counted")
	running := query(dashboardExpr(t, d, "Replicas consuming", "B"))
	require.Len(t, running, 1)
	assert.Equal(t, "1", running[0].Value[1], "one replica running")
	versions := query(dashboardExpr(t, d, "Versions running", "A"))
	require.Len(t, versions, 1)
	assert.NotEmpty(t, versions[0].Metric["version"])
	assert.Len(t, versions[0].Metric, 1, "by version alone")
	assert.Equal(t, "1", versions[0].Value[1])
}
