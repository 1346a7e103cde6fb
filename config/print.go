package config

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// WriteYAML writes c, redacted (see Redacted), as a configuration file Load
// reads back: every setting once, nested by its YAML path, in the order of
// the settings table, durations as "30s". It is what "consumer config"
// prints: the effective configuration, whatever the file, the environment
// and the flags each gave.
//
// The settings named in omit (LoadWithDerived's derived ones) are left out,
// and named with their values in a comment at the top.
func (c Config) WriteYAML(w io.Writer, omit ...string) error {
	r := c.Redacted()
	root := &yaml.Node{Kind: yaml.MappingNode}
	var left []string
	for _, s := range settings {
		if s.field == nil {
			continue
		}
		if slices.Contains(omit, s.yaml) {
			left = append(left, fmt.Sprintf("%s: %s", s.yaml, formatValue(s.field(&r))))
			continue
		}
		val, err := yamlValue(s.field(&r))
		if err != nil {
			return fmt.Errorf("%s: %w", s.yaml, err)
		}
		n := root
		keys := strings.Split(s.yaml, ".")
		for _, k := range keys[:len(keys)-1] {
			n = yamlChild(n, k)
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: keys[len(keys)-1]}, val)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	if len(left) > 0 {
		doc.HeadComment = "Derived from the settings below, so left out (given, each would hold against the others):\n" +
			strings.Join(left, "\n")
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	return enc.Close()
}

// yamlChild returns the mapping under key in the mapping n, added when it is
// not there yet.
func yamlChild(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	child := &yaml.Node{Kind: yaml.MappingNode}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, child)
	return child
}

// yamlValue returns a field's value as a YAML node: a duration as text, an
// unset list or mapping as null (so it reads back unset), anything else as
// yaml encodes it.
func yamlValue(ptr any) (*yaml.Node, error) {
	var v any = ptr
	switch p := ptr.(type) {
	case *time.Duration:
		v = formatDuration(*p)
	case *[]string:
		v = nilOr(*p == nil, ptr)
	case *[]int:
		v = nilOr(*p == nil, ptr)
	case *map[string]string:
		v = nilOr(*p == nil, ptr)
	}
	if v == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	if n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode {
		n.Style = yaml.FlowStyle // short lists on one line, as in consumer.example.yaml
	}
	return n, nil
}

func nilOr(isNil bool, v any) any {
	if isNil {
		return nil
	}
	return v
}
