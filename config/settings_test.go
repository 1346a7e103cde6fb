package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// yamlFields returns the address of every leaf field of v by its dotted
// YAML path.
func yamlFields(v reflect.Value, prefix string, out map[string]uintptr) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == v.Type().PkgPath() {
			yamlFields(v.Field(i), prefix+tag+".", out)
			continue
		}
		out[prefix+tag] = v.Field(i).Addr().Pointer()
	}
}

func TestSettingsCoverConfig(t *testing.T) {
	var cfg Config
	fields := map[string]uintptr{}
	yamlFields(reflect.ValueOf(&cfg).Elem(), "", fields)

	seen := map[string]bool{}
	for _, s := range settings {
		if s.field == nil {
			assert.Equal(t, configFlag, s.flag, "only --config has no field")
			continue
		}
		addr, ok := fields[s.yaml]
		require.True(t, ok, "setting %q names no field", s.yaml)
		assert.Equal(t, addr, reflect.ValueOf(s.field(&cfg)).Pointer(), "setting %q points to another field", s.yaml)
		assert.False(t, seen[s.yaml], "setting %q listed twice", s.yaml)
		seen[s.yaml] = true
	}
	for path := range fields {
		assert.True(t, seen[path], "field %q has no setting", path)
	}
}

func TestSettingNames(t *testing.T) {
	flags, envs := map[string]bool{}, map[string]bool{}
	for _, s := range settings {
		assert.NotEmpty(t, s.env, "every setting has an environment variable")
		assert.NotEmpty(t, s.help)
		assert.False(t, envs[s.env], "env %s twice", s.env)
		envs[s.env] = true
		if s.secret {
			assert.Empty(t, s.flag, "a secret on the command line shows in ps")
			continue
		}
		require.NotEmpty(t, s.flag, "%s has no flag", s.yaml)
		assert.False(t, flags[s.flag], "flag %s twice", s.flag)
		flags[s.flag] = true
		if !strings.HasPrefix(s.env, "NATS_") {
			want := "CONSUMER_" + strings.ToUpper(strings.ReplaceAll(s.flag, "-", "_"))
			assert.Equal(t, want, s.env, "env of --%s", s.flag)
		}
	}
}

// leafPaths adds the dotted path of every leaf key under the mapping n to
// out, and fails for a leaf without a line comment.
func leafPaths(t *testing.T, n *yaml.Node, prefix string, out map[string]bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		path := prefix + key.Value
		if val.Kind == yaml.MappingNode {
			leafPaths(t, val, path+".", out)
			continue
		}
		out[path] = true
		assert.True(t, key.LineComment != "" || val.LineComment != "", "%s has no comment", path)
	}
}

func TestExampleFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile("consumer.example.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	got := map[string]bool{}
	leafPaths(t, doc.Content[0], "", got)

	want := map[string]bool{}
	for _, s := range settings {
		if s.yaml != "" {
			want[s.yaml] = true
		}
	}
	assert.Equal(t, want, got)
}
