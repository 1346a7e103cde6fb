package deploy_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "sigs.k8s.io/yaml"
)

// TestAuditCronJob: the daily audit runs consumer audit on yesterday with
// the meter-audit user's own creds and reply prefix, fails its Job on a
// finding (no retry), reads the fleet's configuration, and is not one of
// the fleet's pods for the Service, the PodDisruptionBudget or the
// NetworkPolicy.
func TestAuditCronJob(t *testing.T) {
	t.Parallel()
	m := load(t)
	var cj batchv1.CronJob
	decodeStrict(t, "audit-cronjob.yaml", &cj)
	assert.Equal(t, "batch/v1", cj.APIVersion)
	assert.Equal(t, "CronJob", cj.Kind)
	assert.Empty(t, cj.Namespace, "the namespace comes from the kustomization")
	assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	require.NotNil(t, cj.Spec.TimeZone)
	assert.Equal(t, "Etc/UTC", *cj.Spec.TimeZone, "--day yesterday is a UTC day")
	job := cj.Spec.JobTemplate.Spec
	require.NotNil(t, job.BackoffLimit)
	assert.Zero(t, *job.BackoffLimit, "a failed audit is not retried")
	pod := job.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "meter-consumer", c.Image, "the kustomization's images stanza names it")
	assert.Equal(t, []string{"audit", "--day", "yesterday", "--json"}, c.Args)
	e := env(c)
	assert.Equal(t, "_INBOX_meter_audit", e["CONSUMER_NATS_INBOX_PREFIX"].Value, "the audit user's reply prefix (docs/OPERATIONS.md, NATS permissions)")
	assert.Equal(t, configPath, e["CONSUMER_CONFIG"].Value)
	assert.Equal(t, env(container(t, m.deploy))["NATS_URL"].Value, e["NATS_URL"].Value)
	assert.Equal(t, credsPath, e["NATS_CREDS"].Value)
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)

	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	creds := vols[mounts[filepath.Dir(credsPath)]]
	require.NotNil(t, creds.Secret)
	assert.Equal(t, "meter-consumer-audit-nats", creds.Secret.SecretName, "the meter-audit user's creds, not the service's")
	cfg := vols[mounts[filepath.Dir(configPath)]]
	require.NotNil(t, cfg.ConfigMap)
	assert.Equal(t, m.cm.Name, cfg.ConfigMap.Name, "the fleet's configuration (kustomize adds its hash)")
	require.NotNil(t, vols[mounts["/tmp"]].EmptyDir, "the sorted runs go to /tmp")

	podLabels := labels.Set(job.Template.Labels)
	for name, sel := range map[string]map[string]string{
		"service": m.svc.Spec.Selector, "pdb": m.pdb.Spec.Selector.MatchLabels, "networkpolicy": m.netpol.Spec.PodSelector.MatchLabels,
	} {
		assert.False(t, labels.SelectorFromSet(sel).Matches(podLabels), "the %s selects the audit's pods", name)
	}
}

// TestKustomizeBuildRewritesTheAuditsConfigMap: the rendered CronJob mounts
// the generated ConfigMap, hash and all.
func TestKustomizeBuildRewritesTheAuditsConfigMap(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, k8sDir)
	require.Len(t, kinds["CronJob"], 1)
	_, cm := rendered(t, kinds)
	var cj batchv1.CronJob
	require.NoError(t, k8syaml.Unmarshal([]byte(kinds["CronJob"][0]), &cj))
	i := slices.IndexFunc(cj.Spec.JobTemplate.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, cm.Name, cj.Spec.JobTemplate.Spec.Template.Spec.Volumes[i].ConfigMap.Name)
	assert.True(t, strings.HasPrefix(cm.Name, "meter-consumer-"))
}
