package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// scalarProblems checks every scalar the file gives a whole number or a
// duration with the parser the environment's values go through, and a
// switch against the words YAML takes for one (yamlBools), and returns an
// error for each that does not parse, naming its line, its
// setting, its value and what would be valid (the YAML decoder names only a
// Go type, and cuts 1.9 down to 1 for a whole number without a word). The
// lines it reports are returned too, so that the decoder's own report of
// them is dropped.
func scalarProblems(n *yaml.Node, prefix string) (errs []error, lines map[int]bool) {
	lines = map[int]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for _, kv := range pairs(n) {
			path, v := prefix+kv[0].Value, kv[1]
			s, ok := settingAt(path)
			if !ok {
				walk(v, path+".")
				continue
			}
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			if v.Kind != yaml.ScalarNode || s.field == nil {
				continue
			}
			var scratch Config
			var err error
			switch ptr := s.field(&scratch).(type) {
			case *int, *time.Duration:
				err = parseValue(ptr, v.Value)
			case *bool:
				if !yamlBools[strings.ToLower(v.Value)] {
					err = errors.New("want true or false")
				}
			default:
				continue
			}
			if err != nil {
				shown := strconv.Quote(v.Value)
				if s.secret {
					shown = redacted
				}
				errs = append(errs, fmt.Errorf("line %d: %s (%s): %w", v.Line, path, shown, err))
				lines[v.Line] = true
			}
		}
	}
	walk(n, prefix)
	return errs, lines
}

// yamlBools are the words the YAML decoder takes for a switch: YAML 1.2's,
// and YAML 1.1's yes, no, on, off, y and n, in any case.
var yamlBools = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "y": true, "n": true}

// settingAt is the setting whose YAML path is path.
func settingAt(path string) (setting, bool) {
	for _, s := range settings {
		if s.yaml == path && path != "" {
			return s, true
		}
	}
	return setting{}, false
}

// decoderLine reads the line a yaml.TypeError's message names.
var decoderLine = regexp.MustCompile(`^line (\d+): `)

// withoutLines drops from err, a yaml.TypeError, the messages about the
// lines already reported; it returns nil when none is left.
func withoutLines(err error, lines map[int]bool) error {
	var te *yaml.TypeError
	if len(lines) == 0 || !errors.As(err, &te) {
		return err
	}
	var kept []string
	for _, msg := range te.Errors {
		if m := decoderLine.FindStringSubmatch(msg); m != nil {
			if n, _ := strconv.Atoi(m[1]); lines[n] {
				continue
			}
		}
		kept = append(kept, msg)
	}
	if len(kept) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: kept}
}
