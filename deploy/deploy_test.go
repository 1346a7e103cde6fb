package deploy_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/service"
)

const k8sDir = "kubernetes"

// decodeStrict decodes one YAML manifest into out: duplicate keys and any
// field the Go type does not have are errors (sigs.k8s.io/yaml converts to
// JSON, then a json.Decoder with DisallowUnknownFields decodes), so a
// misspelt or misplaced field fails instead of being dropped, as the API
// server's strict field validation would.
func decodeStrict(t *testing.T, name string, out any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(k8sDir, name))
	require.NoError(t, err)
	require.NoError(t, k8syaml.UnmarshalStrict(data, out), "%s does not decode strictly into %T", name, out)
}

// --- the CRDs, mirrored: only the fields of their schemas that we use -------

// serviceMonitor mirrors monitoring.coreos.com/v1 ServiceMonitor.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
			HonorLabels   bool   `json:"honorLabels,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// prometheusRule mirrors monitoring.coreos.com/v1 PrometheusRule.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

// ruleGroup is a Prometheus rule group, as in a rule file and in a
// PrometheusRule's spec.groups.
type ruleGroup struct {
	Name     string `json:"name" yaml:"name"`
	Interval string `json:"interval,omitempty" yaml:"interval,omitempty"`
	Rules    []rule `json:"rules" yaml:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty" yaml:"alert,omitempty"`
	Record      string            `json:"record,omitempty" yaml:"record,omitempty"`
	Expr        string            `json:"expr" yaml:"expr"`
	For         string            `json:"for,omitempty" yaml:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty" yaml:"annotations,omitempty"`
}

// scaledObject mirrors keda.sh/v1alpha1 ScaledObject.
type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Fallback              *struct {
			FailureThreshold int32 `json:"failureThreshold"`
			Replicas         int32 `json:"replicas"`
		} `json:"fallback,omitempty"`
		Advanced *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			MetricType        string            `json:"metricType,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// kustomization mirrors kustomize.config.k8s.io/v1beta1 Kustomization.
type kustomization struct {
	metav1.TypeMeta    `json:",inline"`
	Namespace          string   `json:"namespace,omitempty"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name    string   `json:"name"`
		Files   []string `json:"files"`
		Options struct {
			Labels map[string]string `json:"labels"`
		} `json:"options"`
	} `json:"configMapGenerator"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// --- loading the whole set --------------------------------------------------

type manifests struct {
	sa     corev1.ServiceAccount
	cm     corev1.ConfigMap // what the configMapGenerator makes, before the hash
	netpol networkingv1.NetworkPolicy
	deploy appsv1.Deployment
	svc    corev1.Service
	pdb    policyv1.PodDisruptionBudget
	sm     serviceMonitor
	rule   prometheusRule
	so     scaledObject
	kust   kustomization
}

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{}
	decodeStrict(t, "serviceaccount.yaml", &m.sa)
	decodeStrict(t, "networkpolicy.yaml", &m.netpol)
	decodeStrict(t, "deployment.yaml", &m.deploy)
	decodeStrict(t, "service.yaml", &m.svc)
	decodeStrict(t, "poddisruptionbudget.yaml", &m.pdb)
	decodeStrict(t, "servicemonitor.yaml", &m.sm)
	decodeStrict(t, "prometheusrule.yaml", &m.rule)
	decodeStrict(t, "scaledobject.yaml", &m.so)
	decodeStrict(t, "kustomization.yaml", &m.kust)
	require.Len(t, m.kust.ConfigMapGenerator, 1)
	gen := m.kust.ConfigMapGenerator[0]
	m.cm.Name, m.cm.Labels, m.cm.Data = gen.Name, gen.Options.Labels, map[string]string{}
	for _, f := range gen.Files {
		data, err := os.ReadFile(filepath.Join(k8sDir, f))
		require.NoError(t, err)
		m.cm.Data[filepath.Base(f)] = string(data)
	}
	return m
}

const (
	appName    = "meter-consumer"
	configPath = "/etc/meter-consumer/consumer.yaml"
	credsPath  = "/etc/nats/creds/user.creds"
	secretName = "meter-consumer-nats"
)

func TestManifestKinds(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, c := range []struct {
		got              metav1.TypeMeta
		apiVersion, kind string
	}{
		{m.sa.TypeMeta, "v1", "ServiceAccount"},
		{m.netpol.TypeMeta, "networking.k8s.io/v1", "NetworkPolicy"},
		{m.deploy.TypeMeta, "apps/v1", "Deployment"},
		{m.svc.TypeMeta, "v1", "Service"},
		{m.pdb.TypeMeta, "policy/v1", "PodDisruptionBudget"},
		{m.sm.TypeMeta, "monitoring.coreos.com/v1", "ServiceMonitor"},
		{m.rule.TypeMeta, "monitoring.coreos.com/v1", "PrometheusRule"},
		{m.so.TypeMeta, "keda.sh/v1alpha1", "ScaledObject"},
		{m.kust.TypeMeta, "kustomize.config.k8s.io/v1beta1", "Kustomization"},
	} {
		assert.Equal(t, c.apiVersion, c.got.APIVersion, c.kind)
		assert.Equal(t, c.kind, c.got.Kind)
	}
	for _, meta := range []metav1.ObjectMeta{m.sa.ObjectMeta, m.cm.ObjectMeta, m.netpol.ObjectMeta, m.deploy.ObjectMeta, m.svc.ObjectMeta,
		m.pdb.ObjectMeta, m.sm.Metadata, m.rule.Metadata, m.so.Metadata} {
		assert.Equal(t, appName, meta.Name)
		assert.Empty(t, meta.Namespace, "%s: the namespace comes from the kustomization", meta.Name)
		assert.Equal(t, appName, meta.Labels["app.kubernetes.io/name"])
	}
}

// TestKustomizationListsEveryManifest: every YAML file of the directory is a
// resource or a generator's file of the kustomization, and every one exists.
func TestKustomizationListsEveryManifest(t *testing.T) {
	t.Parallel()
	m := load(t)
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Clone(m.kust.Resources)
	for _, g := range m.kust.ConfigMapGenerator {
		got = append(got, g.Files...)
	}
	sort.Strings(got)
	assert.Equal(t, want, got)
	assert.Equal(t, appName, m.kust.Namespace)
}

// pinnedKustomize is the kustomize go.mod pins as a tool, built once (go
// tool -n builds it into the build cache and names the executable).
var pinnedKustomize = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	if out, err := exec.Command(goBin, "tool", "kustomize", "version").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go tool kustomize: %w\n%s", err, out)
	}
	path, err := exec.Command(goBin, "tool", "-n", "kustomize").Output()
	return strings.TrimSpace(string(path)), err
})

// kustomize renders dir with the kustomize go.mod pins (go tool kustomize:
// no kubectl needed; skipped only where the module proxy cannot be
// reached, and failed then in CI), and decodes every rendered object
// strictly again; it returns them by kind (raw YAML documents).
func kustomize(t *testing.T, dir string) map[string][]string {
	t.Helper()
	bin, err := pinnedKustomize()
	if err != nil {
		unavailable(t, "%v", err)
	}
	cmd := exec.Command(bin, "build", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build %s: %s", dir, stderr.String())
	kinds := map[string][]string{}
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var tm struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		require.NoError(t, k8syaml.Unmarshal([]byte(doc), &tm))
		if tm.Kind == "Namespace" { // cluster-scoped: it is the namespace
			assert.Equal(t, appName, tm.Metadata.Name)
		} else {
			assert.Equal(t, appName, tm.Metadata.Namespace, "%s %s", tm.Kind, tm.Metadata.Name)
		}
		kinds[tm.Kind] = append(kinds[tm.Kind], doc)
		var into any
		switch tm.Kind {
		case "Deployment":
			into = &appsv1.Deployment{}
		case "Service":
			into = &corev1.Service{}
		case "ConfigMap":
			into = &corev1.ConfigMap{}
		case "NetworkPolicy":
			into = &networkingv1.NetworkPolicy{}
		case "ServiceAccount":
			into = &corev1.ServiceAccount{}
		case "Namespace":
			into = &corev1.Namespace{}
		case "PodDisruptionBudget":
			into = &policyv1.PodDisruptionBudget{}
		case "ServiceMonitor":
			into = &serviceMonitor{}
		case "PrometheusRule":
			into = &prometheusRule{}
		case "ScaledObject":
			into = &scaledObject{}
		case "CronJob":
			into = &batchv1.CronJob{}
		default:
			t.Errorf("unexpected kind %s in the build", tm.Kind)
			continue
		}
		assert.NoError(t, k8syaml.UnmarshalStrict([]byte(doc), into), tm.Kind)
	}
	return kinds
}

// TestKustomizeBuild renders the kustomization: every kind once, the image
// from the images stanza, the Deployment mounting the generated ConfigMap.
func TestKustomizeBuild(t *testing.T) {
	t.Parallel()
	m := load(t)
	kinds := kustomize(t, k8sDir)
	assert.Len(t, kinds, 11, "kinds rendered: %v", slices.Sorted(maps.Keys(kinds)))
	d, cm := rendered(t, kinds)
	require.Len(t, m.kust.Images, 1)
	img := m.kust.Images[0]
	assert.Equal(t, cmp.Or(img.NewName, img.Name)+":"+img.NewTag, container(t, d).Image)
	assert.Regexp(t, `^meter-consumer-[a-z0-9]{10}$`, cm.Name, "the generated name carries the content's hash")
	assert.Equal(t, m.cm.Data, cm.Data)
}

// rendered returns the rendered Deployment and ConfigMap, and checks that the
// first mounts the second.
func rendered(t *testing.T, kinds map[string][]string) (appsv1.Deployment, corev1.ConfigMap) {
	t.Helper()
	var d appsv1.Deployment
	var cm corev1.ConfigMap
	require.Len(t, kinds["Deployment"], 1)
	require.Len(t, kinds["ConfigMap"], 1)
	require.NoError(t, k8syaml.Unmarshal([]byte(kinds["Deployment"][0]), &d))
	require.NoError(t, k8syaml.Unmarshal([]byte(kinds["ConfigMap"][0]), &cm))
	var mounted []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			mounted = append(mounted, v.ConfigMap.Name)
		}
	}
	assert.Equal(t, []string{cm.Name}, mounted, "the pods mount the generated ConfigMap")
	return d, cm
}

// TestConfigChangeRollsThePods: a changed consumer.yaml renders a ConfigMap
// of another name, and so another pod template: the next apply rolls the
// pods instead of leaving them on the old file.
func TestConfigChangeRollsThePods(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if filepath.Base(f) == "consumer.yaml" {
			changed := strings.Replace(string(data), "  level: info", "  level: debug", 1)
			require.NotEqual(t, string(data), changed)
			data = []byte(changed)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600))
	}
	before, beforeCM := rendered(t, kustomize(t, k8sDir))
	after, afterCM := rendered(t, kustomize(t, dir))
	assert.NotEqual(t, beforeCM.Name, afterCM.Name)
	assert.NotEqual(t, before.Spec.Template, after.Spec.Template, "a new pod template is a rollout")
}

// TestOverlayExample renders deploy/overlays/example, the overlay
// docs/OPERATIONS.md shows, and checks that its values land.
func TestOverlayExample(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, filepath.Join("overlays", "example"))
	require.Len(t, kinds["ScaledObject"], 1)
	var so scaledObject
	require.NoError(t, k8syaml.UnmarshalStrict([]byte(kinds["ScaledObject"][0]), &so))
	require.Len(t, so.Spec.Triggers, 1)
	account := so.Spec.Triggers[0].Metadata["account"]
	assert.True(t, nkeys.IsValidPublicAccountKey(account), "the overlay sets an account public key: %q", account)
	d, _ := rendered(t, kinds)
	assert.Regexp(t, `^registry\.example\.com/meterline/meter-consumer:v1\.4\.0@sha256:`, container(t, d).Image,
		"the overlay's images stanza names the base's image")
	assert.Equal(t, load(t).so.Spec.Triggers[0].Metadata["stream"], so.Spec.Triggers[0].Metadata["stream"],
		"the patch replaces the account only")
}

// --- the Deployment ---------------------------------------------------------

func container(t *testing.T, d appsv1.Deployment) corev1.Container {
	t.Helper()
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d.Spec.Template.Spec.Containers[0]
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestDeployment(t *testing.T) {
	t.Parallel()
	m := load(t)
	d := m.deploy
	pod := d.Spec.Template.Spec
	c := container(t, d)

	assert.Nil(t, d.Spec.Replicas, "KEDA owns the replica count: an apply must not reset it")
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the selector matches the pod template")
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxUnavailable)

	assert.Equal(t, "meter-consumer", c.Image, "the name the images stanza maps; the tag is set there")
	require.Len(t, m.kust.Images, 1)
	assert.Equal(t, c.Image, m.kust.Images[0].Name)
	assert.NotContains(t, []string{"", "latest"}, m.kust.Images[0].NewTag, "a pinned tag")

	// probes
	port := containerPort(t, c, "http-metrics")
	assert.Equal(t, int32(8080), port.ContainerPort)
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.LivenessProbe.HTTPGet)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, intstr.FromString("http-metrics"), c.LivenessProbe.HTTPGet.Port)
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.ReadinessProbe.HTTPGet)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, intstr.FromString("http-metrics"), c.ReadinessProbe.HTTPGet.Port)

	// resources
	r := c.Resources
	assert.Equal(t, resource.MustParse("500m"), r.Requests[corev1.ResourceCPU])
	assert.Equal(t, resource.MustParse("2"), r.Limits[corev1.ResourceCPU])
	assert.Equal(t, resource.MustParse("256Mi"), r.Limits[corev1.ResourceMemory])
	assert.Equal(t, r.Limits[corev1.ResourceMemory], r.Requests[corev1.ResourceMemory], "memory request = limit")
	// GOMEMLIMIT: 80-90% of the limit, TestDeploymentAndJobsGOMEMLIMITLeaveHeadroom.
	assert.Equal(t, "false", env(c)["CONSUMER_NATS_EMBEDDED"].Value, "production never falls back to an embedded server")

	// security
	psc := pod.SecurityContext
	require.NotNil(t, psc)
	assert.Equal(t, ptr(true), psc.RunAsNonRoot)
	assert.Equal(t, ptr(int64(65532)), psc.RunAsUser)
	assert.Equal(t, ptr(int64(65532)), psc.FSGroup, "the non-root user reads the mounted creds through fsGroup")
	require.NotNil(t, psc.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.Equal(t, ptr(true), sc.RunAsNonRoot)
	assert.Equal(t, ptr(int64(65532)), sc.RunAsUser)
	assert.Equal(t, ptr(true), sc.ReadOnlyRootFilesystem)
	assert.Equal(t, ptr(false), sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	require.NotNil(t, sc.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	assert.Equal(t, ptr(false), pod.AutomountServiceAccountToken)
	assert.Equal(t, m.sa.Name, pod.ServiceAccountName)

	// environment and volumes
	e := env(c)
	assert.Equal(t, configPath, e["CONSUMER_CONFIG"].Value)
	assert.Equal(t, credsPath, e["NATS_CREDS"].Value)
	assert.NotEmpty(t, e["NATS_URL"].Value)
	for name, v := range e {
		secret := strings.Contains(name, "PASSWORD") || strings.Contains(name, "TOKEN")
		assert.False(t, secret && v.ValueFrom == nil,
			"%s: a secret must come from a Secret, not a literal", name)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	cfgMount, ok := mounts[filepath.Dir(configPath)]
	require.True(t, ok, "the config directory is mounted")
	assert.True(t, cfgMount.ReadOnly)
	cfgVol := vols[cfgMount.Name]
	require.NotNil(t, cfgVol.ConfigMap, "the config comes from the ConfigMap")
	assert.Equal(t, m.cm.Name, cfgVol.ConfigMap.Name)
	assert.Contains(t, m.cm.Data, filepath.Base(configPath))

	credsMount, ok := mounts[filepath.Dir(credsPath)]
	require.True(t, ok, "the creds directory is mounted")
	assert.True(t, credsMount.ReadOnly)
	credsVol := vols[credsMount.Name]
	require.NotNil(t, credsVol.Secret, "the creds come from a Secret reference")
	assert.Equal(t, secretName, credsVol.Secret.SecretName)
	require.Len(t, credsVol.Secret.Items, 1)
	assert.Equal(t, filepath.Base(credsPath), credsVol.Secret.Items[0].Key)
	assert.Equal(t, filepath.Base(credsPath), credsVol.Secret.Items[0].Path)
	assert.Equal(t, ptr(int32(0o440)), credsVol.Secret.DefaultMode)

	tmp, ok := mounts["/tmp"]
	require.True(t, ok, "/tmp is writable (read-only root file system)")
	require.NotNil(t, vols[tmp.Name].EmptyDir, "/tmp is an emptyDir")
	assert.False(t, tmp.ReadOnly)

	// No Secret is shipped: the manifests only refer to it.
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NotRegexp(t, `(?m)^kind:\s*Secret\s*$`, string(data), f)
		assert.NotContains(t, string(data), "-----BEGIN NATS USER JWT-----", f)
	}
}

// TestGracePeriodCoversShutdown: the pod's grace period is longer than the
// longest stop (service.MaxStop: shutdown.timeout, the hand-back grace,
// the connection drain and the HTTP server's stop, one after the other) of
// the example configuration and of the ConfigMap, with a margin for the
// process's exit, so SIGKILL does not cut the hand-backs short.
func TestGracePeriodCoversShutdown(t *testing.T) {
	t.Parallel()
	m := load(t)
	grace := time.Duration(*m.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	const exitMargin = 5 * time.Second

	example, err := config.Load([]string{"--config", filepath.Join("..", "config", "consumer.example.yaml"), "--demo"}, nil)
	require.NoError(t, err)
	cm := loadConfigMap(t, m, nil)
	for name, cfg := range map[string]config.Config{"example": example, "configmap": cm} {
		longest := service.MaxStop(cfg.Shutdown.Timeout)
		assert.GreaterOrEqual(t, grace, longest+exitMargin, "%s: grace period >= the longest stop %s + %s", name, longest, exitMargin)
		assert.LessOrEqual(t, grace, longest+2*exitMargin, "%s: not much longer either: a stuck pod holds its reads that long", name)
	}
}

func containerPort(t *testing.T, c corev1.Container, name string) corev1.ContainerPort {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return corev1.ContainerPort{}
}

func ptr[T any](v T) *T { return &v }

// --- the ConfigMap ----------------------------------------------------------

// loadConfigMap writes the ConfigMap's consumer.yaml to a file and loads it
// as the binary would, with getenv as its environment.
func loadConfigMap(t *testing.T, m *manifests, getenv func(string) string) config.Config {
	t.Helper()
	body, ok := m.cm.Data["consumer.yaml"]
	require.True(t, ok, "the ConfigMap has consumer.yaml")
	path := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	cfg, err := config.Load([]string{"--config", path}, getenv)
	require.NoError(t, err, "the ConfigMap's consumer.yaml loads")
	return cfg
}

func TestConfigMapLoads(t *testing.T) {
	t.Parallel()
	m := load(t)
	cfg := loadConfigMap(t, m, nil)
	assert.Equal(t, "nats://nats.nats.svc:4222", cfg.NATS.URL, "a real server, not the embedded one")
	assert.NotEmpty(t, cfg.Downstream.URL)
	assert.False(t, cfg.Demo)
	assert.False(t, cfg.Stream.Create, "streams are provisioned with NATS")
	assert.Equal(t, ":8080", cfg.HTTP.Addr, "the probes and the scrape use port 8080")
	assert.Empty(t, cfg.NATS.Password)
	assert.Empty(t, cfg.NATS.Token)

	// As the pod loads it: the Deployment's environment over the file.
	c := container(t, m.deploy)
	e := env(c)
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	require.NoError(t, os.WriteFile(credsFile, []byte("not real"), 0o600))
	getenv := func(k string) string {
		switch k {
		case "CONSUMER_CONFIG":
			return e[k].Value
		case "NATS_CREDS":
			return credsFile // where the Secret is mounted in the pod
		case "CONSUMER_NATS_NAME":
			return "meter-consumer-7d9c5-abcde" // metadata.name
		}
		return e[k].Value
	}
	pod := loadConfigMap(t, m, getenv)
	assert.Equal(t, cfg.NATS.URL, pod.NATS.URL, "NATS_URL in the Deployment says the same as nats.url in the ConfigMap")
	assert.Equal(t, credsFile, pod.NATS.Creds)
	assert.Equal(t, "meter-consumer-7d9c5-abcde", pod.NATS.Name)
	require.NotNil(t, e["CONSUMER_NATS_NAME"].ValueFrom)
	assert.Equal(t, "metadata.name", e["CONSUMER_NATS_NAME"].ValueFrom.FieldRef.FieldPath)
}

// TestConfigMapHasTheExampleKeys: the ConfigMap's file sets every key of
// config/consumer.example.yaml and no other, so a new setting is not
// forgotten in the deployment.
func TestConfigMapHasTheExampleKeys(t *testing.T) {
	t.Parallel()
	m := load(t)
	example, err := os.ReadFile(filepath.Join("..", "config", "consumer.example.yaml"))
	require.NoError(t, err)
	assert.Equal(t, yamlKeys(t, example), yamlKeys(t, []byte(m.cm.Data["consumer.yaml"])))
}

// yamlKeys returns the dotted paths of every leaf of a YAML mapping.
func yamlKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		mm, ok := v.(map[string]any)
		if !ok {
			keys = append(keys, prefix)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(mm)) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, mm[k])
		}
	}
	walk("", doc)
	return keys
}

// --- Service, PDB, ServiceMonitor, ScaledObject -------------------------------

func TestServiceAndPDBSelectTheDeployment(t *testing.T) {
	t.Parallel()
	m := load(t)
	podLabels := labels.Set(m.deploy.Spec.Template.Labels)

	assert.True(t, labels.SelectorFromSet(m.svc.Spec.Selector).Matches(podLabels), "the Service selects the pods")
	require.Len(t, m.svc.Spec.Ports, 1)
	p := m.svc.Spec.Ports[0]
	assert.Equal(t, "http-metrics", p.Name)
	assert.Equal(t, int32(8080), p.Port)
	assert.Equal(t, intstr.FromString("http-metrics"), p.TargetPort)

	sel, err := metav1.LabelSelectorAsSelector(m.pdb.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(podLabels), "the PDB selects the pods")
	assert.Equal(t, sel.String(), mustSelector(t, m.deploy.Spec.Selector).String(), "the PDB selects exactly the Deployment's pods")
	switch {
	case m.pdb.Spec.MaxUnavailable != nil:
		assert.Equal(t, intstr.FromInt32(1), *m.pdb.Spec.MaxUnavailable)
		assert.Nil(t, m.pdb.Spec.MinAvailable, "one of minAvailable and maxUnavailable")
	case m.pdb.Spec.MinAvailable != nil:
		assert.Equal(t, intstr.FromInt32(1), *m.pdb.Spec.MinAvailable)
	default:
		t.Error("the PDB sets neither minAvailable nor maxUnavailable")
	}
}

func mustSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	require.NoError(t, err)
	return sel
}

func TestServiceMonitorScrapesMetrics(t *testing.T) {
	t.Parallel()
	m := load(t)
	sel := mustSelector(t, &m.sm.Spec.Selector)
	assert.True(t, sel.Matches(labels.Set(m.svc.Labels)), "the ServiceMonitor selects the Service")
	require.NotEmpty(t, m.sm.Spec.JobLabel, "the job is pinned, not the Service's name by default")
	assert.Equal(t, "meter-consumer", m.svc.Labels[m.sm.Spec.JobLabel], "the job the alerts and the dashboard select")
	assert.NotEmpty(t, m.sm.Metadata.Labels["release"], "kube-prometheus-stack selects monitors by release")
	assert.Equal(t, m.sm.Metadata.Labels["release"], m.rule.Metadata.Labels["release"],
		"the ServiceMonitor and the PrometheusRule are picked up by the same Prometheus")
	require.Len(t, m.sm.Spec.Endpoints, 1)
	ep := m.sm.Spec.Endpoints[0]
	assert.Equal(t, m.svc.Spec.Ports[0].Name, ep.Port)
	assert.Equal(t, "/metrics", ep.Path)
	interval, err := time.ParseDuration(ep.Interval)
	require.NoError(t, err)
	timeout, err := time.ParseDuration(ep.ScrapeTimeout)
	require.NoError(t, err)
	assert.Less(t, timeout, interval)
}

func TestScaledObject(t *testing.T) {
	t.Parallel()
	m := load(t)
	so := m.so.Spec
	assert.Equal(t, "apps/v1", so.ScaleTargetRef.APIVersion)
	assert.Equal(t, "Deployment", so.ScaleTargetRef.Kind)
	assert.Equal(t, m.deploy.Name, so.ScaleTargetRef.Name, "KEDA scales the Deployment")
	require.NotNil(t, so.MinReplicaCount)
	require.NotNil(t, so.MaxReplicaCount)
	assert.GreaterOrEqual(t, *so.MinReplicaCount, int32(2), "at least two replicas, so the PDB can let one go")
	assert.Greater(t, *so.MaxReplicaCount, *so.MinReplicaCount)
	require.NotNil(t, so.Fallback)
	assert.Equal(t, int32(math.Ceil(0.8*float64(*so.MaxReplicaCount))), so.Fallback.Replicas,
		"a lost reading holds 80% of the maximum, not the minimum: a fleet scaled out mid-cycle stays near its size")
	require.NotNil(t, so.Advanced)
	require.NotNil(t, so.Advanced.HorizontalPodAutoscalerConfig)
	b := so.Advanced.HorizontalPodAutoscalerConfig.Behavior
	require.NotNil(t, b)
	require.NotNil(t, b.ScaleDown)
	assert.GreaterOrEqual(t, *b.ScaleDown.StabilizationWindowSeconds, int32(300), "scale down slowly")

	cfg := loadConfigMap(t, m, nil)
	require.Len(t, so.Triggers, 1)
	tr := so.Triggers[0]
	assert.Equal(t, "nats-jetstream", tr.Type)
	md := tr.Metadata
	for _, k := range []string{"natsServerMonitoringEndpoint", "stream", "consumer", "lagThreshold"} {
		assert.NotEmpty(t, md[k], k)
	}
	// No account in the base: KEDA v2.20 builds no scaler without one, so the
	// base alone does not scale (TestKEDAParsesTheTrigger); overlays add it.
	assert.NotContains(t, md, "account")
	assert.NotContains(t, md, "accountID")
	known := []string{"natsServerMonitoringEndpoint", "account", "accountID", "stream", "consumer", "lagThreshold",
		"activationLagThreshold", "useHttps"}
	for k := range md {
		assert.Contains(t, known, k, "a nats-jetstream trigger has no metadata %q", k)
	}
	// A consumer KEDA does not find is an error, and the fleet holds the
	// fallback: the names must be exact.
	assert.Equal(t, "METER_READS", md["stream"])
	assert.Equal(t, cfg.Stream.Name, md["stream"], "the stream the consumer reads")
	assert.Equal(t, "meter-consumer", md["consumer"])
	assert.Equal(t, cfg.Consumer.Durable, md["consumer"], "the durable the consumer uses")
	lag, err := resource.ParseQuantity(md["lagThreshold"])
	require.NoError(t, err, "lagThreshold is a number")
	assert.Positive(t, lag.Value())
	assert.NotContains(t, md["natsServerMonitoringEndpoint"], "://", "host:port, without a scheme (useHttps says it)")
	assert.Regexp(t, `^nats-headless\.`, md["natsServerMonitoringEndpoint"],
		"the headless service: KEDA reaches each server of a cluster by its name under it")
}

// validAccount: the name KEDA finds in /jsz: an account's public key (a
// server with creds is in operator mode) or $G (a server without accounts).
func validAccount(a string) bool {
	return a == "$G" || nkeys.IsValidPublicAccountKey(a)
}

// TestNetworkPolicy: only Prometheus gets in, and only to the metrics port;
// egress is not restricted.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	m := load(t)
	np := m.netpol.Spec
	assert.Equal(t, mustSelector(t, m.deploy.Spec.Selector).String(), mustSelector(t, &np.PodSelector).String(),
		"it isolates exactly the Deployment's pods")
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.PolicyTypes)
	require.Len(t, np.Ingress, 1)
	in := np.Ingress[0]
	require.Len(t, in.From, 1, "one peer: with two, either selector alone would let traffic in")
	peer := in.From[0]
	require.NotNil(t, peer.NamespaceSelector, "Prometheus' namespace")
	require.NotNil(t, peer.PodSelector, "Prometheus' pods")
	assert.Nil(t, peer.IPBlock)
	assert.NotEmpty(t, peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	assert.NotEmpty(t, peer.PodSelector.MatchLabels)
	require.Len(t, in.Ports, 1)
	p := in.Ports[0]
	require.NotNil(t, p.Port)
	assert.Equal(t, intstr.FromString(m.svc.Spec.Ports[0].Name), *p.Port, "the port the ServiceMonitor scrapes")
	assert.Equal(t, m.sm.Spec.Endpoints[0].Port, p.Port.StrVal)
	require.NotNil(t, p.Protocol)
	assert.Equal(t, corev1.ProtocolTCP, *p.Protocol)
	assert.Nil(t, p.EndPort)
}

// TestNetworkPolicyLetsNothingIntoTheJobs: in the base, a policy of their
// own isolates the pods of the audit CronJob and of the dead-letter Job
// (deploy/tools/dlq-job.yaml) and lets nothing in: they serve nothing. Their
// egress is left open, as the consumer's is; a default-deny overlay adds it
// (TestNetworkPolicyLetsTheAuditReachDNSAndNATS, ...DLQJob...).
func TestNetworkPolicyLetsNothingIntoTheJobs(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, k8sDir)
	nps := policies(t, kinds)
	require.Len(t, kinds["CronJob"], 1)
	var cj batchv1.CronJob
	require.NoError(t, k8syaml.UnmarshalStrict([]byte(kinds["CronJob"][0]), &cj))
	data, err := os.ReadFile(filepath.Join("tools", "dlq-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	d, _ := rendered(t, kinds)
	consumer := labels.Set(d.Spec.Template.Labels)
	for name, pod := range map[string]labels.Set{
		cj.Name: cj.Spec.JobTemplate.Spec.Template.Labels, job.Name: job.Spec.Template.Labels,
	} {
		in := isolating(t, nps, pod, networkingv1.PolicyTypeIngress)
		require.NotEmpty(t, in, "%s: a policy isolates its pods' ingress", name)
		for _, np := range in {
			assert.Empty(t, np.Spec.Ingress, "%s: %s lets nothing in", name, np.Name)
			assert.False(t, mustSelector(t, &np.Spec.PodSelector).Matches(consumer),
				"%s: %s does not select the consumer's pods (Prometheus must get in)", name, np.Name)
		}
		assert.Nil(t, egressAllowed(t, nps, pod), "%s: egress open in the base, as the consumer's", name)
	}
}

// goMemLimit parses a GOMEMLIMIT as the Go runtime does (runtime's
// parseByteCount: a number of bytes with an optional suffix B, KiB, MiB,
// GiB or TiB; not Kubernetes' Mi, nor a decimal point).
func goMemLimit(s string) (int64, bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, false
	}
	shift, ok := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[s[i:]]
	return n << shift, ok
}

// TestDeploymentAndJobsGOMEMLIMITLeaveHeadroom: every container of the
// Deployment, the audit CronJob (rendered: the base, the example overlay,
// the partitions) and the dead-letter Job sets GOMEMLIMIT to 80-90% of its
// memory limit, in a form Go reads: the runtime's soft limit counts only
// the memory it manages, and the Go team recommends leaving headroom below
// the container's limit (a resourceFieldRef could only give all of it).
func TestDeploymentAndJobsGOMEMLIMITLeaveHeadroom(t *testing.T) {
	t.Parallel()
	check := func(where string, c corev1.Container) {
		t.Helper()
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		require.True(t, ok, "%s: a memory limit", where)
		e, ok := env(c)["GOMEMLIMIT"]
		require.True(t, ok, "%s: GOMEMLIMIT is set", where)
		assert.Nil(t, e.ValueFrom, "%s: a literal beside the limit, not all of the limit", where)
		soft, ok := goMemLimit(e.Value)
		require.True(t, ok, "%s: GOMEMLIMIT %q is a value Go reads (e.g. 230MiB)", where, e.Value)
		assert.LessOrEqual(t, float64(soft), 0.9*float64(limit.Value()), "%s: GOMEMLIMIT %s <= 90%% of the limit %s", where, e.Value, limit.String())
		assert.GreaterOrEqual(t, float64(soft), 0.8*float64(limit.Value()), "%s: GOMEMLIMIT %s >= 80%% of the limit %s", where, e.Value, limit.String())
	}
	for _, dir := range []string{k8sDir, filepath.Join("overlays", "example"), filepath.Join("overlays", "partitions")} {
		kinds := kustomize(t, dir)
		require.NotEmpty(t, kinds["Deployment"], dir)
		require.NotEmpty(t, kinds["CronJob"], dir)
		for _, doc := range kinds["Deployment"] {
			var d appsv1.Deployment
			require.NoError(t, k8syaml.Unmarshal([]byte(doc), &d))
			for _, c := range d.Spec.Template.Spec.Containers {
				check(dir+": "+d.Name+"/"+c.Name, c)
			}
		}
		for _, doc := range kinds["CronJob"] {
			var cj batchv1.CronJob
			require.NoError(t, k8syaml.Unmarshal([]byte(doc), &cj))
			for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
				check(dir+": "+cj.Name+"/"+c.Name, c)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("tools", "dlq-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	for _, c := range job.Spec.Template.Spec.Containers {
		check("tools/dlq-job.yaml: "+c.Name, c)
	}

	for in, want := range map[string]int64{"230MiB": 230 << 20, "241172480": 241172480, "1GiB": 1 << 30, "230Mi": -1, "0.9GiB": -1, "": -1} {
		got, ok := goMemLimit(in)
		if want < 0 {
			assert.False(t, ok, "%q is no GOMEMLIMIT", in)
		} else {
			assert.Equal(t, want, got, in)
		}
	}
}

// TestNoStrayFields proves the strict decoding works: a misplaced field in a
// copy of the Deployment is an error.
func TestNoStrayFields(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(k8sDir, "deployment.yaml"))
	require.NoError(t, err)
	bad := strings.Replace(string(data), "      terminationGracePeriodSeconds: 50",
		"      terminationGracePeriodSeconds: 50\n      terminationGracePeriod: 50", 1)
	require.NotEqual(t, string(data), bad)
	var d appsv1.Deployment
	err = k8syaml.UnmarshalStrict([]byte(bad), &d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "terminationGracePeriod")

	dup := strings.Replace(string(data), "  revisionHistoryLimit: 5", "  revisionHistoryLimit: 5\n  revisionHistoryLimit: 6", 1)
	err = k8syaml.UnmarshalStrict([]byte(dup), &d)
	require.Error(t, err, "duplicate keys are errors")

	var so scaledObject
	soData, err := os.ReadFile(filepath.Join(k8sDir, "scaledobject.yaml"))
	require.NoError(t, err)
	badSO := strings.Replace(string(soData), "  maxReplicaCount: 10", "  maxReplicas: 10", 1)
	require.Error(t, k8syaml.UnmarshalStrict([]byte(badSO), &so))
}
