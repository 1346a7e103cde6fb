package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/meterline/meter-consumer/config"
)

const configUsage = `usage: consumer config [flags]

Prints the effective configuration, what the service would run with, as a
YAML file it reads back: the file (--config or CONSUMER_CONFIG), then the
environment, then the flags, each setting once. Secrets are redacted: the
NATS password and token, a password in a URL, credential-like headers. It
takes every flag of the service, below; an invalid configuration is refused
as the service refuses it, with exit code 2.

`

// runConfig runs "consumer config".
func runConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		configHelp(stdout)
		return exitOK
	}
	cfg, derived, err := config.LoadWithDerived(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		configHelp(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "consumer config: %v\n", err)
		return exitBadUsage
	}
	warnUnknownEnv(stderr, "consumer config")
	if err := cfg.WriteYAML(stdout, derived...); err != nil {
		fmt.Fprintf(stderr, "consumer config: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// configHelp is "consumer config --help": what it does, then its flags,
// the service's, with their defaults.
func configHelp(w io.Writer) {
	fmt.Fprint(w, configUsage)
	config.Settings(w)
}
