package topology

import "strings"

// covers reports whether every subject that subject matches is matched by
// filter too: "meter.>" covers "meter.reads.>" and "meter.reads.north",
// "meter.reads.*" covers "meter.reads.north" but not "meter.reads.>".
func covers(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, ft := range f {
		if ft == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		switch {
		case ft == "*":
			if s[i] == ">" {
				return false
			}
		case ft != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// uncovered returns the subjects no filter covers.
func uncovered(subjects, filters []string) []string {
	var out []string
	for _, s := range subjects {
		covered := false
		for _, f := range filters {
			if covers(f, s) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}
