package config

import (
	"slices"
	"strings"
)

// envPrefix starts the name of every environment variable of the consumer's
// own (the NATS_ ones are shared with the nats CLI, whose other variables
// are not the consumer's to judge).
const envPrefix = "CONSUMER_"

// UnknownEnv returns, from environ ("NAME=value" entries, as os.Environ
// gives them), the names that start with CONSUMER_ but are no setting's, each
// with the setting's name it is closest to when one is within three edits
// (a misspelling), sorted by name. They are ignored: the caller warns, and
// does not refuse to start, because the platform may set such names itself
// (Kubernetes gives every pod <SERVICE>_PORT and the like for each Service,
// so a Service named consumer sets CONSUMER_PORT).
func UnknownEnv(environ []string) (unknown []Unknown) {
	known := map[string]bool{}
	for _, s := range settings {
		if s.env != "" {
			known[s.env] = true
		}
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] {
			continue
		}
		u := Unknown{Name: name}
		best := 4
		for k := range known {
			if d := edits(name, k); d < best || d == best && k < u.Closest {
				best, u.Closest = d, k
			}
		}
		unknown = append(unknown, u)
	}
	slices.SortFunc(unknown, func(a, b Unknown) int { return strings.Compare(a.Name, b.Name) })
	return unknown
}

// Unknown is an environment variable that is no setting's, and the setting
// it is closest to ("" when none is within three edits).
type Unknown struct{ Name, Closest string }

// edits is the Levenshtein distance between a and b.
func edits(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
