package deploy_test

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/service"
)

// decodeAll decodes every document of a kind into a new T, by name.
func decodeAll[T any](t *testing.T, docs []string, name func(*T) string) map[string]*T {
	t.Helper()
	out := map[string]*T{}
	for _, d := range docs {
		v := new(T)
		require.NoError(t, k8syaml.Unmarshal([]byte(d), v))
		out[name(v)] = v
	}
	return out
}

// podConfig loads the configuration a pod of d runs with: the ConfigMap it
// mounts, then its container's environment on top.
func podConfig(t *testing.T, d *appsv1.Deployment, cms map[string]*corev1.ConfigMap) config.Config {
	t.Helper()
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm, ok := cms[cmName]
	require.True(t, ok, "%s mounts the ConfigMap %s, which is rendered", d.Name, cmName)
	path := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cm.Data["consumer.yaml"]), 0o600))
	env := map[string]string{}
	for _, e := range container(t, *d).Env {
		if e.ValueFrom == nil && e.Name != "CONSUMER_CONFIG" {
			env[e.Name] = e.Value
		}
	}
	// Mounted from Secrets in the pod; not here (TestOverlayMountsTheEngineCredentialsFromSecrets reads them).
	for _, k := range []string{"NATS_CREDS", "CONSUMER_DOWNSTREAM_TOKEN_FILE", "CONSUMER_DOWNSTREAM_CA", "CONSUMER_DOWNSTREAM_CERT", "CONSUMER_DOWNSTREAM_KEY"} {
		env[k] = ""
	}
	cfg, err := config.Load([]string{"--config", path}, func(k string) string { return env[k] })
	require.NoError(t, err, "%s: the configuration loads", d.Name)
	return cfg
}

// TestTwoPartitions renders deploy/overlays/partitions, two partitions of
// the example overlay made by deploy/components/partition, and checks that
// each is a fleet of its own: its pods consume its stream, subjects and
// durable (and so its records bucket), its ScaledObject scales its
// Deployment on that durable, and its Service, PodDisruptionBudget,
// ServiceMonitor and spreading select its pods only; the alert rules come
// once.
func TestTwoPartitions(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, filepath.Join("overlays", "partitions"))
	deployments := decodeAll(t, kinds["Deployment"], func(d *appsv1.Deployment) string { return d.Name })
	cms := decodeAll(t, kinds["ConfigMap"], func(c *corev1.ConfigMap) string { return c.Name })
	services := decodeAll(t, kinds["Service"], func(s *corev1.Service) string { return s.Name })
	pdbs := decodeAll(t, kinds["PodDisruptionBudget"], func(p *policyv1.PodDisruptionBudget) string { return p.Name })
	monitors := decodeAll(t, kinds["ServiceMonitor"], func(s *serviceMonitor) string { return s.Metadata.Name })
	scaled := decodeAll(t, kinds["ScaledObject"], func(s *scaledObject) string { return s.Metadata.Name })
	require.Len(t, deployments, 2)
	assert.Len(t, kinds["PrometheusRule"], 1, "one set of rules per namespace: they group by stream and durable")
	assert.Len(t, cms, 2, "the partitions' local-config ConfigMaps are not rendered")

	for n := range 2 {
		name := fmt.Sprintf("meter-consumer-p%d", n)
		other := fmt.Sprintf("meter-consumer-p%d", 1-n)
		d, ok := deployments[name]
		require.True(t, ok, name)
		pods := labels.Set(d.Spec.Template.Labels)
		otherPods := labels.Set(deployments[other].Spec.Template.Labels)

		cfg := podConfig(t, d, cms)
		assert.Equal(t, fmt.Sprintf("METER_READS_%d", n), cfg.Stream.Name, name)
		assert.Equal(t, []string{fmt.Sprintf("meter.reads.%d.>", n)}, cfg.Stream.Subjects, name)
		assert.Equal(t, fmt.Sprintf("meter-consumer-%d", n), cfg.Consumer.Durable, name)
		assert.Equal(t, fmt.Sprintf("METER_READS_%d_meter-consumer-%d_records", n, n), service.Topology(cfg).Bucket(), name)
		assert.Equal(t, "METER_READS_DLQ", cfg.DLQ.Stream, "%s: one dead-letter stream for every partition", name)

		so, ok := scaled[name]
		require.True(t, ok, name)
		assert.Equal(t, name, so.Spec.ScaleTargetRef.Name, "%s: KEDA scales its own Deployment", name)
		md := so.Spec.Triggers[0].Metadata
		assert.Equal(t, cfg.Stream.Name, md["stream"], name)
		assert.Equal(t, cfg.Consumer.Durable, md["consumer"], name)
		_, err := kedaParse(md)
		assert.NoError(t, err, "%s: KEDA builds its scaler (the example overlay's account)", name)

		sel := func(what string, m map[string]string) {
			s := labels.SelectorFromSet(m)
			assert.True(t, s.Matches(pods), "%s: %s selects its pods", name, what)
			assert.False(t, s.Matches(otherPods), "%s: %s does not select %s's pods", name, what, other)
		}
		sel("the Deployment", d.Spec.Selector.MatchLabels)
		sel("the Service", services[name].Spec.Selector)
		sel("the PodDisruptionBudget", pdbs[name].Spec.Selector.MatchLabels)
		for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			sel("the spreading", c.LabelSelector.MatchLabels)
		}
		m, ok := monitors[name]
		require.True(t, ok, name)
		ms := labels.SelectorFromSet(m.Spec.Selector.MatchLabels)
		assert.True(t, ms.Matches(labels.Set(services[name].Labels)), "%s: its ServiceMonitor scrapes its Service", name)
		assert.False(t, ms.Matches(labels.Set(services[other].Labels)), "%s: and not %s's (no target scraped twice)", name, other)
		assert.Equal(t, appName, services[name].Labels[m.Spec.JobLabel], "%s: job stays meter-consumer, as the rules select", name)
	}
}

// auditConfig loads the configuration a run of the audit CronJob cj audits
// with, as consumer audit loads it (config.LoadTool, cmd/consumer/audit.go):
// the file CONSUMER_CONFIG names, where the pod mounts it from the
// ConfigMap, then the container's environment, then its arguments.
func auditConfig(t *testing.T, cj *batchv1.CronJob, cms map[string]*corev1.ConfigMap) config.Config {
	t.Helper()
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	require.Len(t, pod.Containers, 1, cj.Name)
	c := pod.Containers[0]
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	e := env(c)
	files := map[string]string{} // the path in the pod -> the ConfigMap's item
	for _, vm := range c.VolumeMounts {
		v := vols[vm.Name]
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := cms[v.ConfigMap.Name]
		require.True(t, ok, "%s mounts the ConfigMap %s, which is rendered", cj.Name, v.ConfigMap.Name)
		for _, item := range v.ConfigMap.Items {
			files[vm.MountPath+"/"+item.Path] = cm.Data[item.Key]
		}
	}
	body, ok := files[e["CONSUMER_CONFIG"].Value]
	require.True(t, ok, "%s: CONSUMER_CONFIG %q is a mounted item of the ConfigMap", cj.Name, e["CONSUMER_CONFIG"].Value)
	path := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	getenv := func(k string) string {
		switch k {
		case "CONSUMER_CONFIG":
			return path
		case "NATS_CREDS": // mounted from a Secret in the pod; not here
			return ""
		}
		if e[k].ValueFrom != nil {
			return ""
		}
		return e[k].Value
	}
	require.NotEmpty(t, c.Args, cj.Name)
	require.Equal(t, "audit", c.Args[0], cj.Name)
	fs := flag.NewFlagSet("consumer audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("day", "", "") // the audit's own flags the CronJob gives (auditArgs.define)
	fs.Bool("json", false, "")
	cfg, rest, err := config.LoadTool(fs, c.Args[1:], getenv)
	require.NoError(t, err, "%s: the configuration loads", cj.Name)
	require.Empty(t, rest, cj.Name)
	return cfg
}

// dailyAt returns the minute of the day of a daily cron schedule "M H * * *".
func dailyAt(t *testing.T, schedule string) int {
	t.Helper()
	var m, h int
	var rest string
	n, _ := fmt.Sscanf(schedule, "%d %d %s", &m, &h, &rest)
	require.Equal(t, 3, n, "%q: a daily schedule, M H * * *", schedule)
	require.True(t, strings.HasSuffix(schedule, fmt.Sprintf("%d %d * * *", m, h)), "%q: a daily schedule, M H * * *", schedule)
	require.True(t, m >= 0 && m < 60 && h >= 0 && h < 24, schedule)
	return 60*h + m
}

// TestEachPartitionAuditsItsOwn: in deploy/overlays/partitions each
// partition's audit CronJob, loaded as consumer audit loads it, audits that
// partition's stream, durable and records bucket (those of its
// Deployment's pods), not the base's METER_READS, under a NATS connection
// name of its own; it carries the partition's label, stays out of the
// fleet's selectors, and the audits
// start at different times, at least 30 minutes apart, so that no two read
// the streams at once.
func TestEachPartitionAuditsItsOwn(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, filepath.Join("overlays", "partitions"))
	deployments := decodeAll(t, kinds["Deployment"], func(d *appsv1.Deployment) string { return d.Name })
	cms := decodeAll(t, kinds["ConfigMap"], func(c *corev1.ConfigMap) string { return c.Name })
	services := decodeAll(t, kinds["Service"], func(s *corev1.Service) string { return s.Name })
	pdbs := decodeAll(t, kinds["PodDisruptionBudget"], func(p *policyv1.PodDisruptionBudget) string { return p.Name })
	cronJobs := decodeAll(t, kinds["CronJob"], func(c *batchv1.CronJob) string { return c.Name })
	require.Len(t, cronJobs, 2, "one audit per partition")

	starts := map[int]string{}
	for n := range 2 {
		name := fmt.Sprintf("meter-consumer-p%d", n)
		partition := fmt.Sprintf("p%d", n)
		cj, ok := cronJobs[fmt.Sprintf("meter-consumer-audit-p%d", n)]
		require.True(t, ok, "%s: its audit CronJob", name)
		d, ok := deployments[name]
		require.True(t, ok, name)

		cfg := auditConfig(t, cj, cms)
		fleet := podConfig(t, d, cms)
		assert.Equal(t, fmt.Sprintf("METER_READS_%d", n), cfg.Stream.Name, cj.Name)
		assert.Equal(t, []string{fmt.Sprintf("meter.reads.%d.>", n)}, cfg.Stream.Subjects, cj.Name)
		assert.Equal(t, fmt.Sprintf("meter-consumer-%d", n), cfg.Consumer.Durable, cj.Name)
		assert.Equal(t, fmt.Sprintf("METER_READS_%d_meter-consumer-%d_records", n, n), service.Topology(cfg).Bucket(), cj.Name)
		assert.Equal(t, service.Topology(fleet).Bucket(), service.Topology(cfg).Bucket(), "%s: its fleet's bucket", cj.Name)
		assert.Equal(t, fleet.Stream.Name, cfg.Stream.Name, "%s: its fleet's stream", cj.Name)
		assert.Equal(t, fleet.Consumer.Durable, cfg.Consumer.Durable, "%s: its fleet's durable", cj.Name)
		assert.Equal(t, fleet.DLQ.Stream, cfg.DLQ.Stream, "%s: the one dead-letter stream", cj.Name)
		assert.Equal(t, fleet.DLQ.Prefix, cfg.DLQ.Prefix, cj.Name)
		assert.Equal(t, cj.Name, cfg.NATS.Name, "%s: the NATS server's connection list names the partition's audit", cj.Name)

		for what, l := range map[string]map[string]string{
			"the CronJob": cj.Labels, "its Jobs": cj.Spec.JobTemplate.Labels, "its pods": cj.Spec.JobTemplate.Spec.Template.Labels,
		} {
			assert.Equal(t, partition, l["meterline.io/partition"], "%s: the partition's label on %s", cj.Name, what)
			assert.Equal(t, "meter-consumer-audit", l["app.kubernetes.io/name"], "%s: the audit's name on %s", cj.Name, what)
		}
		pods := labels.Set(cj.Spec.JobTemplate.Spec.Template.Labels)
		assert.False(t, labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(pods), "%s: not one of the fleet's pods", cj.Name)
		assert.False(t, labels.SelectorFromSet(services[name].Spec.Selector).Matches(pods), "%s: not behind the Service", cj.Name)
		assert.False(t, labels.SelectorFromSet(pdbs[name].Spec.Selector.MatchLabels).Matches(pods), "%s: not counted by the PDB", cj.Name)

		at := dailyAt(t, cj.Spec.Schedule)
		for other, by := range starts {
			gap := min(abs(at-other), 24*60-abs(at-other))
			assert.GreaterOrEqual(t, gap, 30, "%s (%q) and %s start %d minutes apart", cj.Name, cj.Spec.Schedule, by, gap)
		}
		starts[at] = cj.Name
	}
	assert.Len(t, starts, 2, "the audits start at different times")
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestPartitionsShareTheNamespaceWideObjects: the Namespace and the alert
// rules (which group by stream and durable, so one set covers every
// partition) are rendered once, at the level of deploy/overlays/partitions,
// and in no partition: removing one partition removes neither, nor the
// other partitions' alerts. They are the example overlay's own, and the
// namespace-wide part adds nothing else to the partitions.
func TestPartitionsShareTheNamespaceWideObjects(t *testing.T) {
	t.Parallel()
	all := kustomize(t, filepath.Join("overlays", "partitions"))
	require.Len(t, all["PrometheusRule"], 1, "one set of rules per namespace")
	require.Len(t, all["Namespace"], 1)
	example := kustomize(t, filepath.Join("overlays", "example"))
	for _, kind := range []string{"PrometheusRule", "Namespace"} {
		assert.True(t, slices.Equal(example[kind], all[kind]), "the example overlay's %s, unchanged (no name suffix)", kind)
	}

	count := func(kinds map[string][]string) (n int) {
		for _, docs := range kinds {
			n += len(docs)
		}
		return n
	}
	partitions := 0
	for n := range 2 {
		dir := filepath.Join("overlays", "partitions", fmt.Sprintf("p%d", n))
		one := kustomize(t, dir)
		assert.Empty(t, one["PrometheusRule"], "%s alone holds no rules: they are the namespace's", dir)
		assert.Empty(t, one["Namespace"], "%s alone holds no Namespace: deleting it would delete the namespace", dir)
		require.NotEmpty(t, one["Deployment"], dir)
		partitions += count(one)
	}
	assert.Equal(t, partitions+2, count(all), "the partitions, the Namespace and the rules, nothing else")
	shared := kustomize(t, filepath.Join("overlays", "partitions", "namespace"))
	assert.Equal(t, []string{"Namespace", "PrometheusRule"}, slices.Sorted(maps.Keys(shared)),
		"overlays/partitions/namespace deletes every other kind of the example overlay")
}
