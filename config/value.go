package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The functions here read and write a field through the pointer a setting's
// field func returns. The types are the few Config uses.

// parseValue sets the field ptr points to from s, as given in an environment
// variable or a flag. The error says what would be valid, without the value.
func parseValue(ptr any, s string) error {
	switch p := ptr.(type) {
	case *string:
		*p = s
	case *bool:
		v, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return errors.New("want true or false")
		}
		*p = v
	case *int:
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return errors.New("want an integer")
		}
		*p = v
	case *time.Duration:
		v, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return errors.New(`want a duration such as "500ms", "30s" or "5m"`)
		}
		*p = v
	case *[]string:
		*p = splitList(s)
	case *[]int:
		items := splitList(s)
		v := make([]int, len(items))
		for i, item := range items {
			n, err := strconv.Atoi(item)
			if err != nil {
				return errors.New("want comma-separated integers such as 400,404,422")
			}
			v[i] = n
		}
		*p = v
	case *map[string]string:
		v, err := parseHeaders(s)
		if err != nil {
			return err
		}
		*p = v
	default:
		panic(fmt.Sprintf("config: no parser for %T", ptr))
	}
	return nil
}

// errHeaderLine says what a header setting takes; it never holds the value,
// which may be a secret.
var errHeaderLine = errors.New(`want "Name: value" headers, one a line (or one a flag), such as "X-Tenant: north"`)

// parseHeaders reads "Name: value" lines; blank lines are skipped and "" is
// nil. A name given twice, in any case, is an error.
func parseHeaders(s string) (map[string]string, error) {
	var m map[string]string
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, errHeaderLine
		}
		if m == nil {
			m = map[string]string{}
		}
		if err := addHeader(m, name, strings.TrimSpace(value)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// addHeader adds name to m unless m has it already, in any case.
func addHeader(m map[string]string, name, value string) error {
	for k := range m {
		if strings.EqualFold(k, name) {
			return fmt.Errorf("header %q given twice", name)
		}
	}
	m[name] = value
	return nil
}

// formatValue returns the field ptr points to as parseValue would read it.
func formatValue(ptr any) string {
	switch p := ptr.(type) {
	case *string:
		return *p
	case *bool:
		return strconv.FormatBool(*p)
	case *int:
		return strconv.Itoa(*p)
	case *time.Duration:
		return formatDuration(*p)
	case *[]string:
		return strings.Join(*p, ",")
	case *[]int:
		s := make([]string, len(*p))
		for i, n := range *p {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	case *map[string]string:
		lines := make([]string, 0, len(*p))
		for _, name := range slices.Sorted(maps.Keys(*p)) {
			lines = append(lines, name+": "+(*p)[name])
		}
		return strings.Join(lines, "\n")
	default:
		panic(fmt.Sprintf("config: no formatter for %T", ptr))
	}
}

// formatDuration is d.String() without zero minutes and seconds: "5m", not
// "5m0s"; "1h", not "1h0m0s". time.ParseDuration reads it back.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// typeName names the kind of value a flag takes, for Usage.
func typeName(ptr any) string {
	switch ptr.(type) {
	case *bool:
		return ""
	case *int:
		return "int"
	case *time.Duration:
		return "duration"
	case *[]string:
		return "list"
	case *[]int:
		return "ints"
	case *map[string]string:
		return `"Name: value"`
	default:
		return "string"
	}
}

// splitList splits a comma-separated list, trimming spaces and dropping empty
// items, so "" is the empty list.
func splitList(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// fieldValue is a flag.Value writing to a field.
type fieldValue struct{ ptr any }

func (v fieldValue) String() string {
	if v.ptr == nil {
		return ""
	}
	return formatValue(v.ptr)
}

// Set parses s into the field; a header flag adds to the headers given by
// the flags before it, so it can be repeated.
func (v fieldValue) Set(s string) error {
	p, ok := v.ptr.(*map[string]string)
	if !ok {
		return parseValue(v.ptr, s)
	}
	add, err := parseHeaders(s)
	if err != nil {
		return err
	}
	m := maps.Clone(*p)
	if m == nil {
		m = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(add)) {
		if err := addHeader(m, name, add[name]); err != nil {
			return err
		}
	}
	*p = m
	return nil
}

// IsBoolFlag lets a bool flag be given without a value: --demo.
func (v fieldValue) IsBoolFlag() bool {
	_, ok := v.ptr.(*bool)
	return ok
}
