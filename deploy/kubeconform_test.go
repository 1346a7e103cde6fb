package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	k8syaml "sigs.k8s.io/yaml"
)

// The modules the schemas come from (see TestKubeconform), each pinned by
// version and by the hash go.sum would hold for it, and the directory of
// the module that holds them.
var (
	k8sOpenAPI = schemaModule{"k8s.io/kubernetes", "v1.37.2", "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE=", "api/openapi-spec/v3"}
	kedaCRDs   = schemaModule{"github.com/kedacore/keda/v2", "v2.20.2", "h1:SR60v8uIcelbveS8n/1jcl8tLdBBIbHMxmdOHw8tKqA=", "config/crd/bases"}
	promOpCRDs = schemaModule{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=", "example/prometheus-operator-crd"}
)

// schemaLocation is kubeconform's -schema-location template under a
// schema directory: core kinds land in v1/ (kubeconform's Group for
// "apiVersion: v1" is "v1"), the others in their group's directory.
const schemaLocation = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"

const objectMetaDef = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// TestKubeconform: kubeconform -strict over every render of deploy/ (issue
// 37), offline.
//
// What is validated, found by walking deploy/ (a new overlay is checked with
// no edit here): `kustomize build` of every directory holding a
// kustomization (components are not renderable alone: they are left to the
// overlays that use them), and every YAML file of Kubernetes objects that
// lies outside any kustomization, applied alone (tools/dlq-job.yaml). Files
// without apiVersion and kind (Prometheus rules, promtool tests,
// Alertmanager's configuration) are not Kubernetes objects and are left out.
//
// The tools are pinned by go.mod's tool directives and run with `go tool`:
// kubeconform (github.com/yannh/kubeconform) and kustomize
// (sigs.k8s.io/kustomize/kustomize/v5), so that the render needs no kubectl
// and neither tool is compiled into this race-instrumented test binary.
//
// The schemas kubeconform reads are made here, in a temporary directory,
// from Go modules the module proxy serves (pinned above):
//   - the built-in kinds: the Kubernetes release's own OpenAPI v3 documents
//     (api/openapi-spec/v3 of k8s.io/kubernetes, the release of k8s.io/api);
//   - ScaledObject and the other KEDA kinds: KEDA's CRDs
//     (config/crd/bases of github.com/kedacore/keda/v2, the v2.20 the
//     manifests target);
//   - ServiceMonitor, PodMonitor, PrometheusRule, AlertmanagerConfig...:
//     the Prometheus Operator's CRDs (example/prometheus-operator-crd of
//     github.com/prometheus-operator/prometheus-operator; v0.85.0 is the
//     newest version of that module the proxy serves, newer ones are tagged
//     for its pkg/apis module only, which holds no CRD).
//
// Each schema is made strict as kubeconform's own openapi2jsonschema does
// (additionalProperties: false wherever properties are listed, except where
// the schema keeps unknown fields), and also at the top level of custom
// resources, whose metadata is checked against the release's ObjectMeta (a
// CRD's schema says only "object"). A field that is not required may be
// null, as the API server accepts.
//
// Without the module proxy the test cannot build the tools or fetch the
// schemas: it fails in CI (CI=true, where the proxy is reachable) and is
// skipped elsewhere.
func TestKubeconform(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := buildTools(t)
	t.Logf("tools built or found in the build cache: %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	schemas := t.TempDir()
	meta := writeBuiltinSchemas(t, k8sOpenAPI.download(t), schemas)
	for _, m := range []schemaModule{kedaCRDs, promOpCRDs} {
		writeCRDSchemas(t, m.download(t), schemas, meta)
	}
	for _, want := range []string{
		"apps/deployment_v1.json", "v1/service_v1.json", "batch/cronjob_v1.json", "batch/job_v1.json",
		"keda.sh/scaledobject_v1alpha1.json", "monitoring.coreos.com/servicemonitor_v1.json",
		"monitoring.coreos.com/podmonitor_v1.json", "monitoring.coreos.com/prometheusrule_v1.json",
		"monitoring.coreos.com/alertmanagerconfig_v1alpha1.json",
	} {
		assert.FileExists(t, filepath.Join(schemas, want))
	}
	written, err := filepath.Glob(filepath.Join(schemas, "*", "*.json"))
	require.NoError(t, err)
	t.Logf("%d schemas written: %s", len(written), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	builds, plain := discoverRenders(t)
	require.Contains(t, builds, k8sDir, "the base")
	require.Contains(t, plain, filepath.Join("tools", "dlq-job.yaml"))
	out := t.TempDir()
	files := map[string]string{} // file kubeconform reads -> what it is
	var base string
	for _, dir := range builds {
		file := filepath.Join(out, strings.ReplaceAll(dir, string(filepath.Separator), "_")+".yaml")
		require.NoError(t, os.WriteFile(file, tl.kustomizeBuild(t, dir), 0o644))
		files[file] = "kustomize build " + dir
		if dir == k8sDir {
			base = file
		}
	}
	var plainFiles []string
	for _, f := range plain {
		abs, err := filepath.Abs(f)
		require.NoError(t, err)
		files[abs] = f
		plainFiles = append(plainFiles, abs)
	}
	t.Logf("rendered %d kustomizations (%s), %d plain manifests (%s): %s", len(builds), strings.Join(builds, ", "),
		len(plain), strings.Join(plain, ", "), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	results := tl.kubeconform(t, schemas, slices.Sorted(maps.Keys(files)))
	t.Logf("kubeconform -strict: %s", time.Since(start).Round(time.Millisecond))
	for _, file := range slices.Sorted(maps.Keys(files)) {
		what := files[file]
		t.Run(what, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			docs := yamlDocs(t, data)
			got := results[file]
			assert.Len(t, got, len(docs), "kubeconform saw every object of %s", what)
			for _, r := range got {
				assert.Equal(t, "statusValid", r.Status, "%s %s/%s: %s %s", what, r.Version, r.Kind+" "+r.Name, r.Msg, r.details())
			}
		})
	}

	t.Run("stray fields are caught", func(t *testing.T) {
		strayFieldsAreCaught(t, tl, schemas, append([]string{base}, plainFiles...)...)
	})
}

// strayFieldsAreCaught: the schemas are strict where a typo would hide, for
// every object of the base's render and of the plain manifests: an unknown
// field at the top, in metadata, in spec, and deep in a container, a
// trigger, an endpoint, a rule; and a value of the wrong type. Each object
// gets one and must come out invalid, its error naming the field.
func strayFieldsAreCaught(t *testing.T, tl tools, schemas string, files ...string) {
	const stray = "strayField"
	type mutation struct {
		kind, where string
		path        []any // to the object that gets the field
		key         string
		value       any
	}
	deep := []mutation{
		{"Deployment", "container", []any{"spec", "template", "spec", "containers", 0}, stray, true},
		{"Deployment", "replicas of the wrong type", []any{"spec"}, "replicas", "three"},
		{"CronJob", "container", []any{"spec", "jobTemplate", "spec", "template", "spec", "containers", 0}, stray, true},
		{"Job", "container", []any{"spec", "template", "spec", "containers", 0}, stray, true},
		{"ScaledObject", "trigger", []any{"spec", "triggers", 0}, stray, true},
		{"ScaledObject", "scaleTargetRef", []any{"spec", "scaleTargetRef"}, stray, true},
		{"ScaledObject", "labels, misspelt", []any{"metadata"}, "label", map[string]any{"a": "b"}},
		{"ServiceMonitor", "endpoint", []any{"spec", "endpoints", 0}, stray, true},
		{"PrometheusRule", "rule", []any{"spec", "groups", 0, "rules", 0}, stray, true},
		{"Service", "port", []any{"spec", "ports", 0}, stray, true},
		{"PodDisruptionBudget", "selector", []any{"spec", "selector"}, stray, true},
		{"NetworkPolicy", "podSelector", []any{"spec", "podSelector"}, stray, true},
	}
	dir := t.TempDir()
	want := map[string]string{} // file -> the field its error names
	applied := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, doc := range yamlDocs(t, data) {
			kind, _ := doc["kind"].(string)
			muts := []mutation{{kind, "top level", nil, stray, true}, {kind, "metadata", []any{"metadata"}, stray, true}}
			if _, ok := doc["spec"]; ok {
				muts = append(muts, mutation{kind, "spec", []any{"spec"}, stray, true})
			}
			for _, m := range deep {
				if m.kind == kind {
					muts = append(muts, m)
					applied[m.kind+" "+m.where] = true
				}
			}
			for _, m := range muts {
				c := deepCopy(t, doc)
				obj, ok := at(c, m.path).(map[string]any)
				require.True(t, ok, "%s has no %v: update the test", kind, m.path)
				obj[m.key] = m.value
				out, err := k8syaml.Marshal(c)
				require.NoError(t, err)
				f := filepath.Join(dir, fmt.Sprintf("%02d-%s-%s.yaml", len(want), kind, strings.ReplaceAll(m.where, " ", "-")))
				require.NoError(t, os.WriteFile(f, out, 0o644))
				want[f] = m.key
			}
		}
	}
	for _, m := range deep {
		assert.True(t, applied[m.kind+" "+m.where], "no %s to put a stray field in (%s): update the test", m.kind, m.where)
	}
	results := tl.kubeconform(t, schemas, slices.Sorted(maps.Keys(want)))
	for f, key := range want {
		got := results[f]
		if assert.Len(t, got, 1, f) {
			r := got[0]
			assert.Equal(t, "statusInvalid", r.Status, "%s: %s %s", filepath.Base(f), r.Msg, r.details())
			assert.Contains(t, r.Msg+r.details(), key, filepath.Base(f))
		}
	}
	t.Logf("%d objects with one stray field or wrong type each: all invalid", len(want))
}

// --- the tools ----------------------------------------------------------------

// tools maps kubeconform and kustomize to their executables, built by `go
// tool` into the build cache.
type tools map[string]string

// buildTools builds both tools (or finds them in the build cache: the step
// that needs the module proxy on a cold module cache), logs their versions
// and returns where the executables are, to run them directly (a `go tool`
// run costs half a second of checks each time).
func buildTools(t *testing.T) tools {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		unavailable(t, "no go command on PATH: %v", err)
	}
	paths := tools{}
	for _, c := range [][]string{{"kubeconform", "-v"}, {"kustomize", "version"}} {
		out, err := exec.Command(goBin, append([]string{"tool"}, c...)...).CombinedOutput()
		if err != nil {
			unavailable(t, "go tool %s: %v\n%s", c[0], err, out)
		}
		t.Logf("go tool %s %s: %s", c[0], c[1], strings.TrimSpace(string(out)))
		path, err := exec.Command(goBin, "tool", "-n", c[0]).Output()
		require.NoError(t, err, "go tool -n %s", c[0])
		paths[c[0]] = strings.TrimSpace(string(path))
	}
	return paths
}

func (tl tools) run(name string, args ...string) (stdout []byte, stderr string, err error) {
	cmd := exec.Command(tl[name], args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.String(), err
}

// unavailable stops the test when what it needs from the module proxy
// cannot be had: a failure in CI, which reaches the proxy; a skip elsewhere.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s\n(CI=true: CI reaches the Go module proxy, so this fails)", msg)
	}
	t.Skipf("%s\n(skipped without the Go module proxy; with CI=true it fails)", msg)
}

func (tl tools) kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	out, stderr, err := tl.run("kustomize", "build", dir)
	require.NoError(t, err, "kustomize build %s: %s", dir, stderr)
	return out
}

type kubeconformResult struct {
	Filename, Kind, Name, Version, Status, Msg string
	ValidationErrors                           []struct{ Path, Msg string }
}

func (r kubeconformResult) details() string {
	var b strings.Builder
	for _, e := range r.ValidationErrors {
		fmt.Fprintf(&b, "\n  %s: %s", e.Path, e.Msg)
	}
	return b.String()
}

// kubeconform runs kubeconform -strict on files with the schemas of dir
// only (never its default, a download), and returns its verdict on every
// object, by file.
func (tl tools) kubeconform(t *testing.T, dir string, files []string) map[string][]kubeconformResult {
	t.Helper()
	args := append([]string{"-strict", "-summary", "-verbose", "-output", "json",
		"-schema-location", filepath.Join(dir, schemaLocation)}, files...)
	out, stderr, err := tl.run("kubeconform", args...)
	var report struct {
		Resources []kubeconformResult
		Summary   struct{ Valid, Invalid, Errors, Skipped int }
	}
	require.NoError(t, json.Unmarshal(out, &report), "kubeconform: %v\n%s\n%s", err, stderr, out)
	byFile := map[string][]kubeconformResult{}
	for _, r := range report.Resources {
		byFile[r.Filename] = append(byFile[r.Filename], r)
	}
	return byFile
}

// --- what deploy/ renders -----------------------------------------------------

var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// discoverRenders walks deploy/ (the test's directory): every directory with
// a kustomization that is not a Component is built; every YAML file of
// Kubernetes objects outside any kustomization's tree is applied alone.
func discoverRenders(t *testing.T) (builds, plain []string) {
	t.Helper()
	var roots []string // kustomizations and components: their files are theirs
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			for _, name := range kustomizationNames {
				data, err := os.ReadFile(filepath.Join(path, name))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				} else if err != nil {
					return err
				}
				var k struct{ Kind string }
				if err := k8syaml.Unmarshal(data, &k); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(path, name), err)
				}
				roots = append(roots, path)
				if k.Kind != "Component" {
					builds = append(builds, path)
				}
				break
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		for _, r := range roots {
			if strings.HasPrefix(path, r+string(filepath.Separator)) {
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range yamlDocs(t, data) {
			if doc["apiVersion"] != nil && doc["kind"] != nil {
				plain = append(plain, path)
				break
			}
		}
		return nil
	})
	require.NoError(t, err)
	return builds, plain
}

// yamlDocs decodes every non-empty document of a YAML stream as JSON would
// have it.
func yamlDocs(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err)
		if doc == nil {
			continue
		}
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil { // a document that is no mapping is no object
			docs = append(docs, m)
		}
	}
}

// --- the schemas --------------------------------------------------------------

type schemaModule struct{ path, version, sum, dir string }

// download fetches the module through the module proxy (go mod download:
// checked against the checksum database), checks it is the pinned one, and
// returns the directory of its schemas in the module cache.
func (m schemaModule) download(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		unavailable(t, "no go command on PATH: %v", err)
	}
	start := time.Now()
	cmd := exec.Command(goBin, "mod", "download", "-json", m.path+"@"+m.version)
	cmd.Dir = t.TempDir() // outside the module: go.mod and go.sum stay as they are
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var info struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &info); err != nil || runErr != nil || info.Error != "" {
		unavailable(t, "go mod download %s@%s: %v %s %s", m.path, m.version, runErr, info.Error, stderr.String())
	}
	require.Equal(t, m.sum, info.Sum, "%s@%s is not the module pinned here", m.path, m.version)
	t.Logf("%s@%s: %s", m.path, m.version, time.Since(start).Round(time.Millisecond))
	return filepath.Join(info.Dir, filepath.FromSlash(m.dir))
}

// writeBuiltinSchemas writes a strict JSON schema for every kind of every
// group-version document of the OpenAPI v3 directory, each with the
// definitions it refers to, and returns ObjectMeta's definitions (for the
// custom resources' metadata).
func writeBuiltinSchemas(t *testing.T, specDir, out string) (objectMeta map[string]any) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(specDir, "*_openapi.json"))
	require.NoError(t, err)
	kinds := 0
	for _, f := range files {
		// api__v1_openapi.json is the core group; apis__<group>__<version>_openapi.json
		// the others; apis__<group>_openapi.json and the like list no kinds.
		var group, version string
		switch parts := strings.Split(strings.TrimSuffix(filepath.Base(f), "_openapi.json"), "__"); {
		case len(parts) == 2 && parts[0] == "api":
			version = parts[1]
		case len(parts) == 3 && parts[0] == "apis":
			group, version = parts[1], parts[2]
		default:
			continue
		}
		var doc struct {
			Components struct{ Schemas map[string]any }
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc), f)
		defs := map[string]map[string]any{}
		for name, s := range doc.Components.Schemas {
			m, ok := s.(map[string]any)
			require.True(t, ok, "%s: %s", f, name)
			strictify(m)
			defs[name] = m
		}
		for name, s := range defs {
			gvks, _ := s["x-kubernetes-group-version-kind"].([]any)
			for _, g := range gvks {
				gvk, _ := g.(map[string]any)
				if gvk["group"] != group || gvk["version"] != version {
					continue // a kind of another group-version, or one of many (DeleteOptions)
				}
				root := maps.Clone(s)
				root["definitions"] = closure(t, defs, name)
				writeSchema(t, out, group, version, gvk["kind"].(string), root)
				kinds++
			}
		}
		if group == "" && version == "v1" {
			objectMeta = closure(t, defs, objectMetaDef)
		}
	}
	require.NotEmpty(t, objectMeta, "no ObjectMeta in %s", specDir)
	require.Greater(t, kinds, 50, "kinds found in %s", specDir)
	return objectMeta
}

// writeCRDSchemas writes a strict JSON schema for every version of every
// CustomResourceDefinition of dir's YAML files, its metadata an ObjectMeta.
func writeCRDSchemas(t *testing.T, dir, out string, objectMeta map[string]any) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, doc := range yamlDocs(t, data) {
			b, err := json.Marshal(doc)
			require.NoError(t, err)
			var crd struct {
				Kind string
				Spec struct {
					Group    string
					Names    struct{ Kind string }
					Versions []struct {
						Name   string
						Schema struct{ OpenAPIV3Schema map[string]any }
					}
				}
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&crd), f)
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			for _, v := range crd.Spec.Versions {
				s := v.Schema.OpenAPIV3Schema
				require.NotNil(t, s, "%s %s: no schema", crd.Spec.Names.Kind, v.Name)
				strictify(s)
				props, ok := s["properties"].(map[string]any)
				require.True(t, ok, "%s %s: no properties", crd.Spec.Names.Kind, v.Name)
				props["metadata"] = map[string]any{"$ref": "#/definitions/" + objectMetaDef}
				s["definitions"] = objectMeta
				writeSchema(t, out, crd.Spec.Group, v.Name, crd.Spec.Names.Kind, s)
				n++
			}
		}
	}
	require.NotZero(t, n, "no CustomResourceDefinition in %s", dir)
}

func writeSchema(t *testing.T, out, group, version, kind string, schema map[string]any) {
	t.Helper()
	if group == "" {
		group = version // kubeconform's Group of "apiVersion: v1"
	}
	dir := filepath.Join(out, group)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	data, err := json.Marshal(schema)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, strings.ToLower(kind)+"_"+version+".json"), data, 0o644))
}

// strictify makes an OpenAPI schema a strict JSON schema (draft 4, which
// kubeconform compiles by default), in place, walking it as a schema (a
// property may be called "format" or "$ref"):
//   - additionalProperties: false where properties are listed and nothing
//     else is said, unless the schema keeps unknown fields
//     (x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource);
//   - a property that is not required, or one that is nullable, may be null;
//   - references to #/components/schemas/ point at #/definitions/.
func strictify(s map[string]any) {
	if ref, ok := s["$ref"].(string); ok && strings.HasPrefix(ref, "#/components/schemas/") {
		s["$ref"] = "#/definitions/" + strings.TrimPrefix(ref, "#/components/schemas/")
	}
	if props, ok := s["properties"].(map[string]any); ok {
		_, said := s["additionalProperties"]
		if !said && s["x-kubernetes-preserve-unknown-fields"] != true && s["x-kubernetes-embedded-resource"] != true {
			s["additionalProperties"] = false
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for name, p := range props {
			if p, ok := p.(map[string]any); ok {
				strictify(p)
				if !required[name] {
					nullable(p)
				}
			}
		}
	}
	if s["nullable"] == true {
		nullable(s)
	}
	switch items := s["items"].(type) {
	case map[string]any:
		strictify(items)
	case []any:
		for _, i := range items {
			if i, ok := i.(map[string]any); ok {
				strictify(i)
			}
		}
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		strictify(ap)
	}
	if not, ok := s["not"].(map[string]any); ok {
		strictify(not)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := s[k].([]any)
		for _, sub := range list {
			if sub, ok := sub.(map[string]any); ok {
				strictify(sub)
			}
		}
	}
}

func nullable(s map[string]any) {
	if typ, ok := s["type"].(string); ok && typ != "null" {
		s["type"] = []any{typ, "null"}
	}
}

// closure returns the definitions name refers to, itself included, and
// theirs, transitively.
func closure(t *testing.T, defs map[string]map[string]any, name string) map[string]any {
	t.Helper()
	out := map[string]any{}
	var visit func(string)
	visit = func(name string) {
		if _, done := out[name]; done {
			return
		}
		def, ok := defs[name]
		require.True(t, ok, "no definition %s", name)
		out[name] = def
		refs(def, func(ref string) {
			if n, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
				visit(n)
			}
		})
	}
	visit(name)
	return out
}

// refs calls f with every $ref string in v.
func refs(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				f(s)
			} else {
				refs(x, f)
			}
		}
	case []any:
		for _, x := range v {
			refs(x, f)
		}
	}
}

// --- small helpers ------------------------------------------------------------

func deepCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// at follows path (keys and indexes) from v; nil where it leads nowhere.
func at(v any, path []any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			l, _ := v.([]any)
			if p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}
