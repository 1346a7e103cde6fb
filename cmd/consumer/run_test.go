package main_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	consumer "github.com/meterline/meter-consumer/cmd/consumer"
	"github.com/meterline/meter-consumer/internal/natstest"
)

func TestHelpAndSubcommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		give     []string
		wantCode int
		wantOut  []string // on stdout
		wantErr  []string // on stderr
	}{
		{"--help", []string{"--help"}, 0, []string{"Usage: consumer [flags]", "--downstream-url", "Subcommands:", "consumer dlq", "consumer version"}, nil},
		{"-h", []string{"-h"}, 0, []string{"Usage: consumer [flags]"}, nil},
		{"help", []string{"help"}, 0, []string{"Usage: consumer [flags]"}, nil},
		{"--help after flags", []string{"--log-level", "debug", "--help"}, 0, []string{"Usage: consumer [flags]"}, nil},
		{"dlq --help", []string{"dlq", "--help"}, 0, []string{"usage: consumer dlq <subcommand>", "list", "show SEQ", "replay", "purge"}, nil},
		{"dlq list --help", []string{"dlq", "list", "--help"}, 0,
			[]string{"usage: consumer dlq list [flags]", "--reason string", "--since string", "--limit int", "(default 0)", "--json", "--nats-url", "--dlq-stream", "(default METER_READS_DLQ)", "--config path"}, nil},
		{"dlq show --help", []string{"dlq", "show", "--help"}, 0, []string{"usage: consumer dlq show SEQ [flags]", "--nats-url"}, nil},
		{"dlq stats -h", []string{"dlq", "stats", "-h"}, 0, []string{"usage: consumer dlq stats [flags]", "--json", "--reason"}, nil},
		{"dlq replay --help", []string{"dlq", "replay", "--help"}, 0,
			[]string{"usage: consumer dlq replay [flags]", "--rate N", "(default 10)", "--max-replays int", "(default 3)", "--dry-run",
				"--by string", "who is acting, recorded on the marks the audit reads (default unknown)"}, nil},
		{"dlq purge --help", []string{"dlq", "purge", "--help"}, 0, []string{"usage: consumer dlq purge [flags]", "--yes",
			"--by string", "who is acting, recorded on the marks the audit reads (default unknown)",
			"--why string", "why the copies are purged, recorded on their marks\n"}, nil},
		{"version --help", []string{"version", "--help"}, 0, []string{"usage: consumer version"}, nil},
		{"config --help", []string{"config", "--help"}, 0, []string{"usage: consumer config [flags]", "Secrets are redacted", "  --concurrency int", "default 32"}, nil},
		{"--help lists config", []string{"--help"}, 0, []string{"consumer config [flags]"}, nil},

		{"unknown subcommand", []string{"frobnicate"}, 2, nil, []string{`unknown subcommand "frobnicate"`, "dlq, audit, config, version, help"}},
		{"unknown dlq subcommand", []string{"dlq", "relpay"}, 2, nil, []string{`unknown subcommand "relpay"`, "list, show, stats, replay, purge"}},
		{"dlq alone", []string{"dlq"}, 2, nil, []string{"usage: consumer dlq"}},
		{"version with an argument", []string{"version", "extra"}, 2, nil, []string{`unexpected argument "extra"`}},
		{"unknown flag", []string{"--frobnicate"}, 2, nil, []string{"frobnicate"}},
		{"bench is not in the product binary", []string{"bench"}, 2, nil, []string{`unknown subcommand "bench"`, "dlq, audit, config, version, help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runTool(t, tt.give...)
			assert.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			for _, want := range tt.wantOut {
				assert.Contains(t, out, want)
			}
			for _, want := range tt.wantErr {
				assert.Contains(t, errOut, want)
			}
			if tt.wantCode == 0 {
				assert.Empty(t, errOut, "help goes to stdout")
			} else {
				assert.Empty(t, out, "errors go to stderr")
			}
		})
	}
}

// A subcommand's help lists its own flags only: list takes no --yes, purge
// no --rate, show no filter, replay no --why.
func TestSubcommandHelpShowsItsOwnFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sub     string
		want    []string
		wantNot []string
	}{
		{"list", []string{"--json", "--limit"}, []string{"--yes", "--rate", "--dry-run", "--by", "--why"}},
		{"show", nil, []string{"--reason", "--json", "--yes", "--rate", "--by", "--why"}},
		{"stats", []string{"--json", "--reason"}, []string{"--yes", "--rate", "--by", "--why"}},
		{"replay", []string{"--rate", "--dry-run", "--by"}, []string{"--yes", "--json", "--why"}},
		{"purge", []string{"--yes", "--since", "--by", "--why"}, []string{"--rate", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			out, _, code := runTool(t, "dlq", tt.sub, "--help")
			require.Equal(t, 0, code)
			for _, w := range tt.want {
				assert.Contains(t, out, w+" ")
			}
			for _, w := range tt.wantNot {
				assert.NotContains(t, out, w+" ")
			}
		})
	}
}

// --by defaults to the environment's USER, else LOGNAME, else unknown.
func TestByDefaultsToTheUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"USER": "alice", "LOGNAME": "al"}, "alice"},
		{map[string]string{"LOGNAME": "al"}, "al"},
		{nil, "unknown"},
	}
	for _, tt := range tests {
		for _, sub := range []string{"replay", "purge"} {
			var out, errOut bytes.Buffer
			code := consumer.Run([]string{"dlq", sub, "--help"}, func(k string) string { return tt.env[k] }, strings.NewReader(""), &out, &errOut)
			require.Equal(t, 0, code, errOut.String())
			assert.Contains(t, out.String(), "recorded on the marks the audit reads (default "+tt.want+")\n", "%s %v", sub, tt.env)
		}
	}
}

// countingListener accepts and counts connections, so a test can tell that
// a command never dialled.
func countingListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return "nats://" + ln.Addr().String(), &n
}

func TestDLQChecksArgumentsBeforeConnecting(t *testing.T) {
	t.Parallel()
	url, dials := countingListener(t)
	tests := []struct {
		name    string
		give    []string
		wantErr string
	}{
		{"show without a sequence", []string{"show"}, "want one dead-letter sequence"},
		{"show with two", []string{"show", "1", "2"}, "want one dead-letter sequence"},
		{"show non-numeric", []string{"show", "abc"}, `sequence "abc": want a positive number`},
		{"show zero", []string{"show", "0"}, `sequence "0": want a positive number`},
		{"show negative", []string{"show", "--", "-3"}, `sequence "-3"`},
		{"bad --since", []string{"list", "--since", "yesterday"}, `--since: invalid time "yesterday"`},
		{"bad --until", []string{"stats", "--until", "2026-13-40"}, "--until"},
		{"--until before --since", []string{"list", "--since", "1h", "--until", "2h"}, "--since/--until"},
		{"bad --subject", []string{"replay", "--subject", "meter..reads"}, "--subject"},
		{"negative --limit", []string{"purge", "--yes", "--limit", "-1"}, "--limit -1"},
		{"unknown --reason", []string{"list", "--reason", "perm"}, `--reason "perm": want permanent or exhausted`},
		{"negative --rate", []string{"replay", "--rate", "-5"}, "--rate -5"},
		{"negative --max-replays", []string{"replay", "--max-replays", "-1"}, "--max-replays -1"},
		{"zero --max-replays", []string{"replay", "--max-replays", "0"}, "--max-replays 0: want 1 or more"},
		{"zero --rate", []string{"replay", "--rate", "0/s"}, "--rate 0"},
		{"a --rate that is not a number", []string{"replay", "--rate", "fast"}, `"fast": want reads a second, such as 5 or 5/s`},
		{"a flag of another subcommand", []string{"list", "--yes"}, "flag provided but not defined: -yes"},
		{"an argument list does not take", []string{"list", "extra"}, `unexpected argument "extra"`},
		{"bad configuration", []string{"list", "--stream", "a.b"}, "stream.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"dlq"}, tt.give...)
			if tt.give[len(tt.give)-1] != "-3" { // after "--" every word is an argument
				args = append(args, "--nats-url", url)
			}
			out, errOut, code := runTool(t, args...)
			assert.Equal(t, 2, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.Contains(t, errOut, tt.wantErr)
		})
	}
	assert.Zero(t, dials.Load(), "no bad command line dialled NATS")

	// The listener does count a command line that passes every check.
	_, _, code := runTool(t, "dlq", "list", "--nats-url", url)
	assert.Equal(t, 1, code, "the listener hangs up")
	assert.Positive(t, dials.Load())
}

// The binary runs the command line the in-process tests run: its help, its
// version and its refusals, with their exit codes and streams.
func TestTheBinaryRunsTheCommandLine(t *testing.T) {
	t.Parallel()
	out, errOut, code := runBinary(t, "--help")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Usage: consumer [flags]")
	assert.Contains(t, out, "Subcommands:")

	out, errOut, code = runBinary(t, "version")
	assert.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^meter-consumer \S+ \(revision \S+, `+regexp.QuoteMeta(runtime.Version())+`\)\n$`, out)

	out, errOut, code = runBinary(t, "dlq", "relpay")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `unknown subcommand "relpay"`)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	want := regexp.MustCompile(`^meter-consumer \S+ \(revision \S+, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	for _, args := range [][]string{{"--version"}, {"version"}, {"--log-level", "debug", "--version"}} {
		out, errOut, code := runTool(t, args...)
		assert.Equal(t, 0, code, errOut)
		assert.Regexp(t, want, out, "%v", args)
	}
}

// The Dockerfile's build command stamps the version; .ci/run runs the same
// command, so CI checks what the image ships.
func TestDockerfileStampsTheVersion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary without the race detector")
	}
	docker, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	ci, err := os.ReadFile("../../.ci/run")
	require.NoError(t, err)
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindSubmatch(docker)
	require.NotNil(t, build, "the Dockerfile's go build line")
	cmdLine := string(build[1])
	ciLine := regexp.MustCompile(`(?m)^(CGO_ENABLED=0 go build .*)$`).FindSubmatch(ci)
	require.NotNil(t, ciLine, ".ci/run's go build line")
	normalised := strings.NewReplacer(`"$out/consumer"`, "/out/consumer", "${VERSION:-}", "${VERSION}", "${REVISION:-}", "${REVISION}").
		Replace(string(ciLine[1]))
	assert.Equal(t, cmdLine, normalised, ".ci/run builds as the Dockerfile does")

	out := filepath.Join(t.TempDir(), "consumer")
	cmd := exec.Command("sh", "-c", strings.Replace(cmdLine, "/out/consumer", out, 1))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "REVISION=0123456789abcdef")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	got, err := exec.Command(out, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "meter-consumer v9.8.7-test (revision 0123456789abcdef, "+runtime.Version()+")\n", string(got))
}

// --pprof-addr serves the profiles on a server of its own: the metrics
// server never serves them, and without the setting nothing listens.
func TestPprofIsServedApartFromTheMetrics(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--http-addr", "127.0.0.1:0",
		"--pprof-addr", "127.0.0.1:0", "--downstream-url", "http://127.0.0.1:1/reads")
	metrics := httpAddr(t, p)
	l := p.First("profiling server listening: for diagnostics, not for a production pod's every day")
	require.NotNil(t, l)
	pprofAddr, _ := l["pprof"].(string)
	require.NotEmpty(t, pprofAddr)

	code, body := get(t, "http://"+pprofAddr+"/debug/pprof/")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "goroutine")
	code, body = get(t, "http://"+pprofAddr+"/debug/pprof/heap?debug=1")
	assert.Equal(t, 200, code)
	assert.True(t, strings.HasPrefix(body, "heap profile"), "a heap profile: %.40s", body)
	code, _ = get(t, "http://"+metrics+"/debug/pprof/")
	assert.Equal(t, 404, code, "the metrics server serves no profile")
	assert.Equal(t, 0, stop(p, 15*time.Second))

	p = start(t, "--nats-url", s.ClientURL(), "--http-addr", "127.0.0.1:0", "--downstream-url", "http://127.0.0.1:1/reads")
	httpAddr(t, p)
	assert.Nil(t, p.First("profiling server listening: for diagnostics, not for a production pod's every day"), "off by default")
	assert.Equal(t, 0, stop(p, 15*time.Second))
}

// A pprof address on the metrics port stops start-up naming both settings.
func TestPprofOnTheMetricsPortIsRefused(t *testing.T) {
	t.Parallel()
	p := start(t, "--http-addr", "127.0.0.1:18080", "--pprof-addr", ":18080", "--downstream-url", "http://127.0.0.1:1/reads")
	require.Eventually(t, p.Exited, 10*time.Second, 10*time.Millisecond)
	l := p.First("configuration refused; not starting")
	require.NotNil(t, l)
	assert.Contains(t, l["error"], `http.pprof_addr (":18080") must not share http.addr's port ("127.0.0.1:18080")`)
}
