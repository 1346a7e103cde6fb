package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/version"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitBadUsage = 2
)

// subcommands are the words "consumer <word>" understands; anything else
// that does not start with a dash is an error naming them.
var subcommands = []string{"dlq", "audit", "config", "version", "help"}

const subcommandsUsage = `
Subcommands:
  consumer dlq list|show|stats|replay|purge   work the dead-letter stream (consumer dlq --help)
  consumer audit --since T --until T          account for every read of a period (consumer audit --help)
  consumer config [flags]                     the effective configuration as YAML, secrets redacted
  consumer version                            the version, revision and Go version (also --version)
  consumer help                               this help (also --help, -h)
`

// run dispatches to a subcommand, or loads the configuration, owns the
// signals and the registry, and runs the service. It returns the process
// exit code.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, rest := args[0], args[1:]
		switch sub {
		case "dlq":
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDLQ(ctx, rest, getenv, stdin, stdout, stderr)
		case "audit":
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAudit(ctx, rest, getenv, stdout, stderr)
		case "config":
			return runConfig(rest, getenv, stdout, stderr)
		case "version":
			return runVersion(rest, stdout, stderr)
		case "help":
			usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "consumer: unknown subcommand %q; valid subcommands: %s (consumer --help)\n",
			sub, strings.Join(subcommands, ", "))
		return exitBadUsage
	}
	if wantsVersion(args) {
		fmt.Fprintln(stdout, version.Get())
		return exitOK
	}
	cfg, err := config.Load(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		refuse(config.LogOf(args, getenv), stderr, err)
		return exitBadUsage
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		return exitBadUsage
	}
	for _, u := range config.UnknownEnv(environ()) {
		log.Warn("an environment variable is no setting: ignored", unknownAttrs(u)...)
	}
	// The version is on the start-up line (and in meter_consumer_build_info),
	// not on every line: a pod's lines are one build's.
	info := version.Get()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal now gets the default action: exit at once
		log.Info("shutting down; a second signal exits at once", slog.Duration("timeout", cfg.Shutdown.Timeout),
			slog.Duration("max_stop", service.MaxStop(cfg.Shutdown.Timeout)))
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := version.Register(reg, info); err != nil {
		log.Error("exiting", slog.Any("error", err))
		return exitFailure
	}
	if err := service.Run(ctx, cfg, service.Deps{Logger: log, Registry: reg, Version: info.Version}); err != nil {
		log.Error("exiting", slog.Any("error", err))
		return exitFailure
	}
	return exitOK
}

// usage writes the service's help: every setting, then the subcommands.
func usage(w io.Writer) {
	config.Usage(w)
	fmt.Fprint(w, subcommandsUsage)
}

// wantsVersion reports whether the flags ask for the version (--version or
// -version before any "--").
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--version", "-version":
			return true
		}
	}
	return false
}

const versionUsage = `usage: consumer version

Prints the version, the VCS revision and the Go version of this binary, as
the meter_consumer_build_info gauge labels them.
`

// runVersion runs "consumer version".
func runVersion(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprintln(stdout, version.Get())
		return exitOK
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		fmt.Fprint(stdout, versionUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "consumer version: unexpected argument %q\n\n%s", args[0], versionUsage)
	return exitBadUsage
}

// environ is the process's environment, for the check of its CONSUMER_
// names (settings are read through getenv).
var environ = os.Environ

// unknownAttrs are the log attributes of an unknown environment variable.
func unknownAttrs(u config.Unknown) []any {
	attrs := []any{slog.String("name", u.Name)}
	if u.Closest != "" {
		attrs = append(attrs, slog.String("did_you_mean", u.Closest))
	}
	return attrs
}

// warnUnknownEnv writes a line to w for each CONSUMER_ environment variable
// that is no setting, prefixed with cmd.
func warnUnknownEnv(w io.Writer, cmd string) {
	for _, u := range config.UnknownEnv(environ()) {
		hint := ""
		if u.Closest != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", u.Closest)
		}
		fmt.Fprintf(w, "%s: warning: %s is no setting: ignored%s\n", cmd, u.Name, hint)
	}
}
