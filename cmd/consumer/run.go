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
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/service"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitBadUsage = 2
)

// run loads the configuration, owns the signals and the registry, and runs
// the service. It returns the process exit code.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "dlq" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runDLQ(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "bench" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runBench(ctx, args[1:], stdout, stderr)
	}
	cfg, err := config.Load(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		config.Usage(stderr)
		fmt.Fprint(stderr, "\nSubcommands:\n  consumer dlq list|show|stats|replay|purge   work the dead-letter stream (consumer dlq --help)\n  consumer bench                              the performance figures (consumer bench --help)\n")
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		return exitBadUsage
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		return exitBadUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal now gets the default action: exit at once
		log.Info("shutting down; a second signal exits at once", slog.Duration("timeout", cfg.Shutdown.Timeout))
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := service.Run(ctx, cfg, service.Deps{Logger: log, Registry: reg}); err != nil {
		log.Error("exiting", slog.Any("error", err))
		return exitFailure
	}
	return exitOK
}
