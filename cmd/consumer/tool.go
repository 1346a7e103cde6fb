package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlqops"
	"github.com/meterline/meter-consumer/internal/service"
)

// What the operator tools, "consumer audit" and "consumer dlq ...", share:
// how they fail, the connection section of their help, --since and --until,
// and their connection to NATS.

// permissionsDoc is where a tool refused a permission sends its user: the
// one place the NATS permissions of every user are defined.
const permissionsDoc = "docs/OPERATIONS.md, NATS permissions"

// toolFail returns how the tool called name fails: a line "name: message"
// on stderr, and code as its exit code.
func toolFail(stderr io.Writer, name string) func(code int, format string, a ...any) int {
	return func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", name, fmt.Sprintf(format, a...))
		return code
	}
}

// printConnFlags writes the connection section of a tool's help: --config,
// then the flags named, each with its default.
func printConnFlags(w io.Writer, fs *flag.FlagSet, names []string) {
	fmt.Fprint(w, "\nConnection (also from the environment and --config; see consumer --help):\n")
	if f := fs.Lookup("config"); f != nil { // config.LoadTool adds it without help
		f.Usage = "`path` of a YAML file to read settings from"
	}
	if f := fs.Lookup("nats-url"); f != nil { // a tool starts no server: it dials the one a consumer on this machine starts
		f.Usage = `NATS server URLs, comma-separated (nats://, tls://, ws://, wss://); "" connects to nats.listen, where a consumer on this machine runs its embedded server`
	}
	config.PrintFlags(w, fs, append([]string{"config"}, names...))
}

// parseSinceUntil reads the values of --since and --until into since and
// until; a flag not given leaves its time as it is. An error names the
// flag.
func parseSinceUntil(sinceFlag, untilFlag string, now time.Time, since, until *time.Time) error {
	for _, tf := range []struct {
		give, name string
		to         *time.Time
	}{{sinceFlag, "--since", since}, {untilFlag, "--until", until}} {
		if tf.give == "" {
			continue
		}
		t, err := dlqops.ParseTimeFlag(tf.give, now)
		if err != nil {
			return fmt.Errorf("%s: %w", tf.name, err)
		}
		*tf.to = t
	}
	return nil
}

// toolConn is a tool's connection to NATS. A refused permission reaches
// the client as an asynchronous error and the request then times out: it
// is remembered, to say why.
type toolConn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	refused atomic.Pointer[string]
}

// dialTool connects a tool with c, its NATS settings; NATS's asynchronous
// errors are written to stderr as warnings. Close the connection when done.
func dialTool(ctx context.Context, c config.NATS, stderr io.Writer) (*toolConn, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tc := &toolConn{}
	nc, err := service.Dial(ctx, c, log, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			msg := err.Error()
			tc.refused.Store(&msg)
		}
		log.Warn("NATS async error", slog.Any("error", err))
	}))
	if err != nil {
		return nil, fmt.Errorf("not connected: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	tc.nc, tc.js = nc, js
	return tc, nil
}

// Close closes the connection.
func (tc *toolConn) Close() { tc.nc.Close() }

// failure is err as a tool reports it: with the permission NATS refused,
// if it refused one, and where the permissions are defined.
func (tc *toolConn) failure(err error) error {
	if r := tc.refused.Load(); r != nil {
		return fmt.Errorf("%w (NATS refused a permission: %s; see %s)", err, *r, permissionsDoc)
	}
	return err
}
