package deploy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "sigs.k8s.io/yaml"
)

// The pods spread across zones, then nodes, each rollout's pods among
// themselves (pod-template-hash), and never wait for room to do so.
func TestPodsSpreadAcrossZonesAndNodes(t *testing.T) {
	t.Parallel()
	d, _ := rendered(t, kustomize(t, k8sDir))
	pod := d.Spec.Template.Spec
	var keys []string
	for _, c := range pod.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		assert.Equal(t, int32(1), c.MaxSkew, c.TopologyKey)
		assert.Equal(t, corev1.ScheduleAnyway, c.WhenUnsatisfiable, "%s: a zone short of room delays no pod", c.TopologyKey)
		assert.Equal(t, []string{"pod-template-hash"}, c.MatchLabelKeys, "%s: a rollout's pods spread among themselves", c.TopologyKey)
		assert.True(t, mustSelector(t, c.LabelSelector).Matches(labels.Set(d.Spec.Template.Labels)), "%s: selects the fleet's pods", c.TopologyKey)
	}
	assert.Equal(t, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, keys)
}

// The base makes its namespace, with the Pod Security Standard restricted
// enforced, and the pods meet it.
func TestNamespaceEnforcesRestricted(t *testing.T) {
	t.Parallel()
	kinds := kustomize(t, k8sDir)
	require.Len(t, kinds["Namespace"], 1)
	var ns corev1.Namespace
	require.NoError(t, k8syaml.UnmarshalStrict([]byte(kinds["Namespace"][0]), &ns))
	assert.Equal(t, appName, ns.Name, "the kustomization's namespace")
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])

	d, _ := rendered(t, kinds)
	pod := d.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		require.NotNil(t, sc, c.Name)
		assert.Equal(t, ptr(false), sc.AllowPrivilegeEscalation, c.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, c.Name)
		assert.Empty(t, sc.Capabilities.Add, c.Name)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, c.Name)
	}
	for _, v := range pod.Volumes {
		assert.Nil(t, v.HostPath, "restricted allows no hostPath: %s", v.Name)
	}
}

// overlay renders deploy/overlays/example and returns its Deployment and its
// NetworkPolicies by name.
func overlay(t *testing.T) (appsv1.Deployment, map[string]networkingv1.NetworkPolicy) {
	t.Helper()
	kinds := kustomize(t, filepath.Join("overlays", "example"))
	d, _ := rendered(t, kinds)
	nps := map[string]networkingv1.NetworkPolicy{}
	for _, doc := range kinds["NetworkPolicy"] {
		var np networkingv1.NetworkPolicy
		require.NoError(t, k8syaml.UnmarshalStrict([]byte(doc), &np))
		nps[np.Name] = np
	}
	return d, nps
}

// The overlay's image is pinned by digest.
func TestOverlayPinsTheImageByDigest(t *testing.T) {
	t.Parallel()
	d, _ := overlay(t)
	assert.Regexp(t, `^registry\.example\.com/meterline/meter-consumer:v[0-9.]+@sha256:[0-9a-f]{64}$`, container(t, d).Image)
}

// The overlay gives the consumer the rate engine's token and client
// certificate from Secrets: loaded as the pod loads it (the ConfigMap's
// file, the pod's environment, each mounted Secret's items where the mount
// puts them), the configuration reads every one of them, over https.
func TestOverlayMountsTheEngineCredentialsFromSecrets(t *testing.T) {
	t.Parallel()
	d, _ := overlay(t)
	pod := d.Spec.Template.Spec
	c := container(t, d)
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}

	// Each Secret's items, written under a directory standing for its mount.
	root := t.TempDir()
	files := secretFiles(t)
	moved := map[string]string{} // mount path -> where the test put it
	secrets := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		v := vols[vm.Name]
		if v.Secret == nil || v.Secret.SecretName == secretName {
			continue
		}
		assert.True(t, vm.ReadOnly, vm.Name)
		assert.Empty(t, vm.SubPath, "%s: a subPath mount is never updated, so a rotation would need a restart", vm.Name)
		secrets[v.Secret.SecretName] = true
		dir := filepath.Join(root, vm.Name)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		for _, item := range v.Secret.Items {
			data, ok := files[item.Key]
			require.True(t, ok, "%s: an item the test does not know: %s", vm.Name, item.Key)
			require.NoError(t, os.WriteFile(filepath.Join(dir, item.Path), data, 0o600))
		}
		moved[vm.MountPath] = dir
	}
	assert.Len(t, secrets, 2, "the token and the TLS Secret: %v", secrets)

	e := env(c)
	getenv := func(name string) string {
		v := e[name].Value
		for mount, dir := range moved {
			if rest, ok := strings.CutPrefix(v, mount+"/"); ok {
				return filepath.Join(dir, rest)
			}
		}
		return v
	}
	for _, name := range []string{"CONSUMER_DOWNSTREAM_TOKEN_FILE", "CONSUMER_DOWNSTREAM_CA", "CONSUMER_DOWNSTREAM_CERT", "CONSUMER_DOWNSTREAM_KEY"} {
		require.NotEqual(t, e[name].Value, getenv(name), "%s (%s) is inside a mounted Secret", name, e[name].Value)
	}
	m := load(t)
	cfg := loadConfigMap(t, m, getenv) // reads the token, the certificate, its key and the CA
	assert.Equal(t, getenv("CONSUMER_DOWNSTREAM_TOKEN_FILE"), cfg.Downstream.TokenFile)
	assert.Equal(t, getenv("CONSUMER_DOWNSTREAM_CERT"), cfg.Downstream.TLS.Cert)
	u, err := url.Parse(cfg.Downstream.URL)
	require.NoError(t, err)
	assert.Equal(t, "https", u.Scheme, "a client certificate is sent over TLS only")
}

// secretFiles are the items of the overlay's Secrets: a token, and a
// self-signed certificate with its key, standing for its own CA.
func secretFiles(t *testing.T) map[string][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "meter-consumer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return map[string][]byte{
		"token":   []byte("rate-engine-token"),
		"tls.crt": cert,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  cert,
	}
}

// The overlay's egress policy, for a default-deny cluster, lets the
// consumer reach DNS, NATS at the port of its URL, and the rate engine at the
// port of its URL, and nothing else.
func TestOverlayEgressPolicy(t *testing.T) {
	t.Parallel()
	d, nps := overlay(t)
	require.Contains(t, nps, "meter-consumer", "the base's ingress policy stays")
	np, ok := nps["meter-consumer-egress"]
	require.True(t, ok, "policies: %v", nps)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
	assert.Equal(t, mustSelector(t, d.Spec.Selector).String(), mustSelector(t, &np.Spec.PodSelector).String(),
		"it applies to exactly the Deployment's pods")

	e := env(container(t, d))
	port := func(raw string) int32 {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		p, err := strconv.Atoi(u.Port())
		require.NoError(t, err, "%s names its port", raw)
		return int32(p)
	}
	want := map[string][]corev1.Protocol{ // namespace -> protocols allowed, each to one port
		"kube-system": {corev1.ProtocolUDP, corev1.ProtocolTCP},
		"nats":        {corev1.ProtocolTCP},
		"billing":     {corev1.ProtocolTCP},
	}
	wantPort := map[string]int32{"kube-system": 53, "nats": port(e["NATS_URL"].Value), "billing": port(e["CONSUMER_DOWNSTREAM_URL"].Value)}
	require.Len(t, np.Spec.Egress, len(want))
	for _, rule := range np.Spec.Egress {
		require.Len(t, rule.To, 1, "one peer: both selectors must match")
		peer := rule.To[0]
		require.NotNil(t, peer.NamespaceSelector)
		require.NotNil(t, peer.PodSelector, "pods of that namespace, not all of it")
		assert.NotEmpty(t, peer.PodSelector.MatchLabels)
		assert.Nil(t, peer.IPBlock)
		ns := peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
		require.Contains(t, want, ns)
		var protocols []corev1.Protocol
		for _, p := range rule.Ports {
			require.NotNil(t, p.Port)
			assert.Equal(t, wantPort[ns], p.Port.IntVal, "%s: the port", ns)
			protocols = append(protocols, *p.Protocol)
		}
		assert.Equal(t, want[ns], protocols, ns)
	}
}
