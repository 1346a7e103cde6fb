package deploy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// The NATS credentials' Secret stands for itself: validation only opens
	// the file, the connection reads it.
	creds := filepath.Join(root, "user.creds")
	require.NoError(t, os.WriteFile(creds, nil, 0o600))
	getenv := func(name string) string {
		if name == "NATS_CREDS" && e[name].Value != "" {
			return creds
		}
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

// --- the Jobs' network: the audit CronJob's and the dead-letter Job's pods --

// policies returns the rendered NetworkPolicies of kinds.
func policies(t *testing.T, kinds map[string][]string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, doc := range kinds["NetworkPolicy"] {
		var np networkingv1.NetworkPolicy
		require.NoError(t, k8syaml.UnmarshalStrict([]byte(doc), &np))
		out = append(out, np)
	}
	return out
}

// isolating returns the policies of nps that select pod for the direction typ.
func isolating(t *testing.T, nps []networkingv1.NetworkPolicy, pod labels.Set, typ networkingv1.PolicyType) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, np := range nps {
		if slices.Contains(np.Spec.PolicyTypes, typ) && mustSelector(t, &np.Spec.PodSelector).Matches(pod) {
			out = append(out, np)
		}
	}
	return out
}

// egressAllowed is where the policies of nps let pod connect to, each
// destination as "peer port/protocol", sorted; nil when no policy isolates
// its egress (then it may connect anywhere). An empty "to" or "ports" of a
// rule is written as what it allows: anywhere, any port.
func egressAllowed(t *testing.T, nps []networkingv1.NetworkPolicy, pod labels.Set) []string {
	t.Helper()
	selector := func(s *metav1.LabelSelector, none string) string {
		if s == nil {
			return none
		}
		if str := mustSelector(t, s).String(); str != "" {
			return str
		}
		return "every"
	}
	var out []string
	for _, np := range isolating(t, nps, pod, networkingv1.PolicyTypeEgress) {
		for _, rule := range np.Spec.Egress {
			peers := []string{"anywhere"}
			if len(rule.To) > 0 {
				peers = nil
			}
			for _, p := range rule.To {
				if p.IPBlock != nil {
					peers = append(peers, fmt.Sprintf("ipBlock %s except %v", p.IPBlock.CIDR, p.IPBlock.Except))
					continue
				}
				peers = append(peers, fmt.Sprintf("namespaces {%s} pods {%s}",
					selector(p.NamespaceSelector, "own"), selector(p.PodSelector, "every")))
			}
			ports := []string{"any port"}
			if len(rule.Ports) > 0 {
				ports = nil
			}
			for _, p := range rule.Ports {
				proto, port := corev1.ProtocolTCP, "any"
				if p.Protocol != nil {
					proto = *p.Protocol
				}
				if p.Port != nil {
					port = p.Port.String()
				}
				if p.EndPort != nil {
					port += fmt.Sprintf("-%d", *p.EndPort)
				}
				ports = append(ports, port+"/"+string(proto))
			}
			for _, peer := range peers {
				for _, port := range ports {
					out = append(out, peer+" "+port)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// urlPort is the port of a URL that names one.
func urlPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	require.NotEmpty(t, u.Port(), "%s names its port", raw)
	return u.Port()
}

// assertJobNetwork checks, in a render of a default-deny overlay, that the
// pods of a Job (its pod labels and container) may reach DNS and its NATS
// (the port of its NATS_URL), by the same peers as the consumer's egress
// policy, and nothing else (not the rate engine); and that nothing may
// connect to them.
func assertJobNetwork(t *testing.T, kinds map[string][]string, name string, pod labels.Set, c corev1.Container) {
	t.Helper()
	nps := policies(t, kinds)
	deployments := decodeAll(t, kinds["Deployment"], func(d *appsv1.Deployment) string { return d.Name })
	require.NotEmpty(t, deployments)
	natsPort := urlPort(t, env(c)["NATS_URL"].Value)
	assert.NotEmpty(t, isolating(t, nps, pod, networkingv1.PolicyTypeEgress), "%s: a policy restricts its pods' egress", name)
	for _, d := range deployments {
		consumer := egressAllowed(t, nps, labels.Set(d.Spec.Template.Labels))
		require.NotEmpty(t, consumer, "%s: the consumer's egress is restricted here", d.Name)
		var want []string // the consumer's DNS and NATS
		for _, e := range consumer {
			if strings.HasSuffix(e, " 53/UDP") || strings.HasSuffix(e, " 53/TCP") || strings.HasSuffix(e, " "+natsPort+"/TCP") {
				want = append(want, e)
			}
		}
		require.Len(t, want, 3, "%s: the consumer's DNS (UDP, TCP) and NATS: %v", d.Name, consumer)
		assert.Equal(t, want, egressAllowed(t, nps, pod),
			"%s: its pods reach DNS and NATS as %s's do, and nothing else", name, d.Name)
	}
	in := isolating(t, nps, pod, networkingv1.PolicyTypeIngress)
	assert.NotEmpty(t, in, "%s: a policy isolates its pods' ingress", name)
	for _, np := range in {
		assert.Empty(t, np.Spec.Ingress, "%s: %s lets nothing in", name, np.Name)
	}
}

// In a default-deny namespace the audit's pods reach DNS and NATS, and
// nothing else, and nothing reaches them: in the example overlay and in
// each partition of deploy/overlays/partitions.
func TestNetworkPolicyLetsTheAuditReachDNSAndNATS(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{filepath.Join("overlays", "example"), filepath.Join("overlays", "partitions")} {
		kinds := kustomize(t, dir)
		require.NotEmpty(t, kinds["CronJob"], dir)
		for _, cj := range decodeAll(t, kinds["CronJob"], func(c *batchv1.CronJob) string { return c.Name }) {
			tmpl := cj.Spec.JobTemplate.Spec.Template
			require.Len(t, tmpl.Spec.Containers, 1)
			assertJobNetwork(t, kinds, dir+": "+cj.Name, labels.Set(tmpl.Labels), tmpl.Spec.Containers[0])
		}
	}
}
