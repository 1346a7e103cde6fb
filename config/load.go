package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load builds the configuration from Default, then the YAML file named by
// --config (or CONSUMER_CONFIG), then the environment as seen through getenv,
// then the flags in args (without the program name), and validates it.
// A nil getenv means an empty environment; an empty variable counts as
// unset. An explicit --config= reads no file, whatever CONSUMER_CONFIG says.
// A flag overrides only when it is given in args.
//
// For -h or --help it returns an error matching [flag.ErrHelp]; print
// [Usage] and exit 0. On any error the returned Config is the zero value.
func Load(args []string, getenv func(string) string) (Config, error) {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, rest, err := load(fs, args, getenv, true)
	if err == nil && len(rest) > 0 {
		return Config{}, fmt.Errorf("flags: unexpected argument %q (see --help)", rest[0])
	}
	return cfg, err
}

// LoadTool is Load for a subcommand such as "consumer dlq list": fs holds
// the subcommand's own flags, to which every configuration flag is added,
// and the positional arguments left after the flags are returned. The
// downstream URL is not required.
func LoadTool(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, []string, error) {
	return load(fs, args, getenv, false)
}

// LoadWithDerived is Load, and also returns the YAML paths of the settings
// derived from others because they were not given (see derive), in table
// order: "consumer config" leaves them out of the file it prints, so that
// the file read back with one setting changed derives them again.
func LoadWithDerived(args []string, getenv func(string) string) (Config, []string, error) {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, rest, set, err := loadSet(fs, args, getenv, true)
	if err == nil && len(rest) > 0 {
		return Config{}, nil, fmt.Errorf("flags: unexpected argument %q (see --help)", rest[0])
	}
	if err != nil {
		return Config{}, nil, err
	}
	var derived []string
	for _, s := range settings {
		if slices.Contains(derivedPaths, s.yaml) && !set[s.yaml] {
			derived = append(derived, s.yaml)
		}
	}
	return cfg, derived, nil
}

func load(fs *flag.FlagSet, args []string, getenv func(string) string, needDownstream bool) (Config, []string, error) {
	cfg, rest, _, err := loadSet(fs, args, getenv, needDownstream)
	return cfg, rest, err
}

// loadSet is load, and also returns the YAML paths given by the file, the
// environment or a flag.
func loadSet(fs *flag.FlagSet, args []string, getenv func(string) string, needDownstream bool) (Config, []string, map[string]bool, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}

	fromFlags := Default()
	addFlags(fs, &fromFlags)
	configPath := fs.String(configFlag, "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, nil, nil, fmt.Errorf("consumer: %w", err)
		}
		return Config{}, nil, nil, fmt.Errorf("flags: %w (see --help)", err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	cfg := Default()
	set := map[string]bool{} // YAML paths given by the file, the environment or a flag
	path := getenv(configEnv)
	if given[configFlag] {
		path = *configPath
	}
	// Every problem is reported at once: the file's, the environment's and
	// the validation's of what they and the flags make (the flags' own stop
	// the parse above, the first of them).
	var problems []error
	if path != "" {
		if err := readFile(&cfg, path, set); err != nil {
			problems = append(problems, err)
		}
	}
	if err := applyEnv(&cfg, getenv, set); err != nil {
		problems = append(problems, err)
	}
	for _, s := range settings {
		if s.field != nil && given[s.flag] {
			reflect.ValueOf(s.field(&cfg)).Elem().Set(reflect.ValueOf(s.field(&fromFlags)).Elem())
			set[s.yaml] = true
		}
	}
	cfg.derive(func(p string) bool { return set[p] })
	if err := cfg.validate(needDownstream); err != nil {
		problems = append(problems, fmt.Errorf("invalid configuration:\n%w", err))
	}
	if len(problems) > 0 {
		return Config{}, nil, nil, errors.Join(problems...)
	}
	return cfg, fs.Args(), set, nil
}

// addFlags adds every configuration flag to fs, writing to cfg.
func addFlags(fs *flag.FlagSet, cfg *Config) {
	for _, s := range settings {
		if s.flag != "" && s.field != nil {
			fs.Var(fieldValue{s.field(cfg)}, s.flag, s.help)
		}
	}
}

// readFile overrides cfg with the settings in the YAML file at path, and
// notes in set the YAML paths it gives.
func readFile(cfg *Config, path string, set map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil // empty
	} else if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // only comments
	}
	var errs []error
	if more := (yaml.Node{}); dec.Decode(&more) == nil && !emptyDocument(&more) {
		// The decoder reads the first only: the settings after a ---
		// would be dropped without a word.
		errs = append(errs, fmt.Errorf("line %d: a second YAML document (after ---): the file is one document; merge the two", more.Line))
	}
	errs = append(errs, unknownKeys(doc.Content[0], "")...)
	yamlLeaves(doc.Content[0], "", set)
	scalars, lines := scalarProblems(doc.Content[0], "")
	errs = append(errs, scalars...)
	// Decoded from the node already parsed: unknownKeys has checked every
	// key, merged ones included, and scalarProblems the whole numbers,
	// durations and switches, so the decoder has only the other values left
	// to refuse; the known keys are decoded beside unknown ones, so that
	// the validation reports what else is wrong at once.
	if err := withoutLines(doc.Content[0].Decode(cfg), lines); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("config file %s: %w", path, errors.Join(errs...))
	}
	return nil
}

// emptyDocument reports a YAML document that holds nothing (a trailing ---
// makes one, of a null).
func emptyDocument(n *yaml.Node) bool {
	return len(n.Content) == 0 || len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null"
}

// unknownKeys returns an error for every key of the mapping n, at the dotted
// path prefix, that names no setting, so a misspelt key is reported with its
// full path, its line and the valid keys beside it; the keys a merge (<<)
// brings are checked as the mapping's own. Anything that is not a mapping
// is left to the decoder (a value of the wrong type).
func unknownKeys(n *yaml.Node, prefix string) []error {
	valid := keysUnder(prefix)
	var errs []error
	for _, kv := range pairs(n) {
		key := kv[0]
		path := prefix + key.Value
		switch {
		case isLeaf(path):
		case slices.Contains(valid, key.Value):
			errs = append(errs, unknownKeys(kv[1], path+".")...)
		default:
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (valid keys here: %s)",
				key.Line, path, strings.Join(valid, ", ")))
		}
	}
	return errs
}

// pairs returns the key and value nodes of the mapping n (none if n is not
// one), an alias followed, with the pairs of the mappings its merge keys
// (<<) bring in place of the merge key: a mapping, an alias of one, or a
// sequence of them.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag != "!!merge" && !(k.Value == "<<" && k.Style == 0) {
			out = append(out, [2]*yaml.Node{k, v})
			continue
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		merged := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			merged = v.Content
		}
		for _, m := range merged {
			out = append(out, pairs(m)...)
		}
	}
	return out
}

// isLeaf reports whether path is the YAML path of a setting.
func isLeaf(path string) bool {
	_, ok := settingAt(path)
	return ok
}

// keysUnder returns the keys valid directly under prefix ("" or "a.b."), in
// table order.
func keysUnder(prefix string) []string {
	var keys []string
	for _, s := range settings {
		rest, ok := strings.CutPrefix(s.yaml, prefix)
		if s.yaml == "" || !ok {
			continue
		}
		key, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// applyEnv overrides cfg with every set environment variable, notes their
// YAML paths in set, and reports every one that does not parse.
func applyEnv(cfg *Config, getenv func(string) string, set map[string]bool) error {
	var errs []error
	for _, s := range settings {
		if s.env == "" || s.field == nil {
			continue
		}
		v := getenv(s.env)
		if v == "" {
			continue
		}
		set[s.yaml] = true
		if err := parseValue(s.field(cfg), v); err != nil {
			shown := fmt.Sprintf("%q", v)
			if _, headers := s.field(cfg).(*map[string]string); s.secret || headers { // a header value may be a secret
				shown = redacted
			}
			errs = append(errs, fmt.Errorf("environment %s=%s: %w", s.env, shown, err))
		}
	}
	return errors.Join(errs...)
}
