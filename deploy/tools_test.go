package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "sigs.k8s.io/yaml"
)

// The dead-letter tool's Job runs consumer dlq in the cluster: the
// overlay's image, the Deployment's NATS, a reader's creds from a Secret of
// its own (never the service's), admitted under the namespace's restricted
// Pod Security, and never counted as one of the fleet's pods.
func TestDLQJob(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("tools", "dlq-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	assert.Equal(t, "batch/v1", job.APIVersion)
	assert.Equal(t, "Job", job.Kind)
	require.NotNil(t, job.Spec.BackoffLimit)
	assert.Zero(t, *job.Spec.BackoffLimit, "run once: never retried behind the operator's back")
	pod := job.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]

	d, _ := overlay(t)
	assert.Equal(t, container(t, d).Image, c.Image, "the overlay's image")
	require.GreaterOrEqual(t, len(c.Args), 2)
	assert.Equal(t, "dlq", c.Args[0])
	assert.Contains(t, []string{"list", "show", "stats"}, c.Args[1], "the shipped Job only reads")

	m := load(t)
	e, service := env(c), env(container(t, m.deploy))
	assert.Equal(t, service["NATS_URL"].Value, e["NATS_URL"].Value, "the Deployment's NATS")
	assert.Equal(t, "_INBOX_meter_dlq_reader", e["CONSUMER_NATS_INBOX_PREFIX"].Value, "the reader's reply prefix (docs/OPERATIONS.md, NATS permissions)")
	require.Len(t, c.VolumeMounts, 1)
	require.Len(t, pod.Volumes, 1)
	vm, vol := c.VolumeMounts[0], pod.Volumes[0]
	require.Equal(t, vm.Name, vol.Name)
	require.NotNil(t, vol.Secret)
	assert.NotEqual(t, secretName, vol.Secret.SecretName, "never the service's creds")
	assert.Contains(t, vol.Secret.SecretName, "dlq-reader")
	assert.True(t, vm.ReadOnly)
	require.Len(t, vol.Secret.Items, 1)
	assert.Equal(t, vm.MountPath+"/"+vol.Secret.Items[0].Path, e["NATS_CREDS"].Value, "NATS_CREDS is the mounted item")

	for name, sel := range map[string]labels.Selector{
		"Deployment": mustSelector(t, m.deploy.Spec.Selector), "PodDisruptionBudget": mustSelector(t, m.pdb.Spec.Selector),
		"Service": labels.SelectorFromSet(m.svc.Spec.Selector),
	} {
		assert.False(t, sel.Matches(labels.Set(job.Spec.Template.Labels)), "the %s must not select the Job's pod", name)
	}

	// What Pod Security "restricted" checks, which the namespace enforces.
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, ptr(true), pod.SecurityContext.RunAsNonRoot)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.Equal(t, ptr(false), sc.AllowPrivilegeEscalation)
	assert.Equal(t, ptr(true), sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, "ALL", strings.Join(capabilities(sc.Capabilities.Drop), ","))
	require.NotNil(t, sc.SeccompProfile)
	assert.Equal(t, "RuntimeDefault", string(sc.SeccompProfile.Type))
	assert.Equal(t, ptr(false), pod.AutomountServiceAccountToken)
}

func capabilities[T ~string](cs []T) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// The runbooks work on the image: it is distroless, with no shell and no
// wget or curl, so no document may tell to run one in the container.
func TestRunbooksNeedNoShellInTheImage(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join("..", "README.md"))
	bad := regexp.MustCompile(`kubectl[^\n` + "`" + `]*\bexec\b[^\n` + "`" + `]*--\s+(sh|bash|ash|wget|curl|cat|ls|env)\b`)
	for _, f := range docs {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range bad.FindAllString(string(data), -1) {
			t.Errorf("%s: %q needs a shell or a tool the distroless image lacks: use kubectl port-forward or kubectl debug", f, m)
		}
	}
}

// In a default-deny namespace the dead-letter Job's pod reaches DNS and
// NATS, and nothing else, and nothing reaches it: with the example overlay
// and with deploy/overlays/partitions applied (the Job is made in the same
// namespace, apart from the kustomization).
func TestNetworkPolicyLetsTheDLQJobReachDNSAndNATS(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("tools", "dlq-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	require.Len(t, job.Spec.Template.Spec.Containers, 1)
	for _, dir := range []string{filepath.Join("overlays", "example"), filepath.Join("overlays", "partitions")} {
		assertJobNetwork(t, kustomize(t, dir), dir+": "+job.Name, labels.Set(job.Spec.Template.Labels), job.Spec.Template.Spec.Containers[0])
	}
}
