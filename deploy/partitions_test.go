package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
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
