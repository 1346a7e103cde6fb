package main

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
)

// printFlags writes the flags of fs named in names, in that order, one a
// line: "  --name type  help (default x)". A default is left out when it is
// empty or false.
func printFlags(w io.Writer, fs *flag.FlagSet, names []string) {
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

// flagNames returns the names of the flags defined in fs so far, sorted.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}
