package config

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Usage writes the command-line help: every flag with its environment
// variable and default, then the settings that have no flag.
func Usage(w io.Writer) {
	fmt.Fprint(w, `Usage: consumer [flags]

Consumes meter reads from a NATS JetStream stream and posts them downstream.
Each setting comes from its default, then the --config YAML file, then its
environment variable, then its flag; each overrides the one before.
Durations look like 500ms, 30s or 5m; lists are comma-separated.

`)
	Settings(w)
}

// Settings writes every flag with its environment variable, YAML path and
// default, then the settings that have no flag: the part of Usage that
// "consumer config --help" shares, its flags being the service's.
func Settings(w io.Writer) {
	def := Default()
	fmt.Fprint(w, "Flags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		arg := "path"
		if s.field != nil {
			arg = typeName(s.field(&def))
		}
		fmt.Fprintf(tw, "  --%s %s\t%s (%s)\n", s.flag, arg, s.help, usageNote(s, def))
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nEnvironment and file only:\n")
	for _, s := range settings {
		if s.flag == "" {
			fmt.Fprintf(tw, "  %s\t%s (%s)\n", s.env, s.help, usageNote(s, def))
		}
	}
	_ = tw.Flush()
}

// usageNote returns "env X, yaml y, default z", leaving out what is absent.
func usageNote(s setting, def Config) string {
	var parts []string
	if s.env != "" {
		parts = append(parts, "env "+s.env)
	}
	if s.yaml != "" {
		parts = append(parts, "yaml "+s.yaml)
	}
	if d := defaultText(s, def); d != "" {
		parts = append(parts, "default "+d)
	}
	return strings.Join(parts, ", ")
}

// defaultText returns a setting's default as text; "" for none or a secret.
func defaultText(s setting, def Config) string {
	if s.field == nil || s.secret {
		return ""
	}
	return formatValue(s.field(&def))
}

// Reference returns a Markdown table of every setting, with its flag,
// environment variable, YAML path, default and description, for docs/CONFIGURATION.md.
func Reference() string {
	def := Default()
	var b strings.Builder
	b.WriteString("| Flag | Environment | YAML | Default | Description |\n")
	b.WriteString("|------|-------------|------|---------|-------------|\n")
	for _, s := range settings {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n",
			code(flagText(s.flag)), code(s.env), code(s.yaml), code(defaultText(s, def)), cell(s.help))
	}
	return b.String()
}

func flagText(name string) string {
	if name == "" {
		return ""
	}
	return "--" + name
}

// code returns s as inline code in a table cell, or "" for "".
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + cell(s) + "`"
}

// cell escapes the one character that would break a table row.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// PrintFlags writes the flags of fs named in names, in that order, one a
// line: "  --name type  help (default x)". A default is left out when it is
// empty or false; a flag of a custom type (a configuration setting) shows
// no type, its help naming its kind. The subcommands and the bench print
// their flags with it, in the house style of Usage.
func PrintFlags(w io.Writer, fs *flag.FlagSet, names []string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		typ, help := flag.UnquoteUsage(f)
		if typ == "value" { // a configuration setting: its help names its kind
			typ = ""
		}
		arg := "--" + f.Name
		if typ != "" {
			arg += " " + typ
		}
		if d := f.DefValue; d != "" && d != "false" {
			help += " (default " + d + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", arg, help)
	}
	_ = tw.Flush()
}
