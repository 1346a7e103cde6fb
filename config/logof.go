package config

import (
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LogOf returns the log section args and getenv ask for, as far as they can
// be read, for a configuration Load refused: so that its error is written in
// the format the process's other lines are (JSON under --log-format json, or
// log.format: json in the file). It reads the flags --log-format and
// --log-level (before any "--"), then CONSUMER_LOG_FORMAT and
// CONSUMER_LOG_LEVEL, then log.format and log.level in the file --config or
// CONSUMER_CONFIG names; what it cannot read keeps its default. It never
// fails: its result may still be a value Load would refuse.
func LogOf(args []string, getenv func(string) string) Log {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	flags := flagValues(args, configFlag, "log-format", "log-level")
	path, given := flags[configFlag]
	if !given {
		path = getenv(configEnv)
	}
	l := Default().Log
	if path != "" {
		if data, err := os.ReadFile(path); err == nil {
			var doc struct {
				Log struct {
					Format string `yaml:"format"`
					Level  string `yaml:"level"`
				} `yaml:"log"`
			}
			if yaml.Unmarshal(data, &doc) == nil {
				l.Format = pick(doc.Log.Format, l.Format)
				l.Level = pick(doc.Log.Level, l.Level)
			}
		}
	}
	l.Format = pick(getenv("CONSUMER_LOG_FORMAT"), l.Format)
	l.Level = pick(getenv("CONSUMER_LOG_LEVEL"), l.Level)
	if v, ok := flags["log-format"]; ok {
		l.Format = v
	}
	if v, ok := flags["log-level"]; ok {
		l.Level = v
	}
	return l
}

// flagValues returns the last value args give each of the flags names
// ("-name v", "--name v", "-name=v", "--name=v"), up to a "--".
func flagValues(args []string, names ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			name, ok = strings.CutPrefix(a, "-")
		}
		if !ok {
			continue
		}
		name, value, hasValue := strings.Cut(name, "=")
		for _, n := range names {
			if name != n {
				continue
			}
			if !hasValue {
				if i+1 >= len(args) {
					break
				}
				i++
				value = args[i]
			}
			out[n] = value
		}
	}
	return out
}

func pick(v, otherwise string) string {
	if v == "" {
		return otherwise
	}
	return v
}
