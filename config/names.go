package config

// Flag returns the flag of the setting at the dotted YAML path, dashes
// included ("--reconcile" for "stream.reconcile"), for a message that tells
// a person how to ask for it; "" when the setting has no flag or there is
// no such setting.
func Flag(yamlPath string) string {
	for _, s := range settings {
		if s.yaml == yamlPath && s.flag != "" {
			return "--" + s.flag
		}
	}
	return ""
}

// Env returns the environment variable of the setting at the dotted YAML
// path ("CONSUMER_RECONCILE" for "stream.reconcile"); "" when it has none
// or there is no such setting.
func Env(yamlPath string) string {
	for _, s := range settings {
		if s.yaml == yamlPath {
			return s.env
		}
	}
	return ""
}
