package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*config.Config)
	}{
		{"default", func(*config.Config) {}},
		{"demo without downstream", func(c *config.Config) { c.Demo = true; c.Downstream.URL = "" }},
		{"demo with incidents", func(c *config.Config) { c.Demo = true; c.DemoIncidents = true; c.Downstream.URL = "" }},
		{"https downstream", func(c *config.Config) { c.Downstream.URL = "https://reads.example.com/v1" }},
		{"nats url list", func(c *config.Config) { c.NATS.URL = "nats://a:4222, tls://b:4222,ws://c,wss://d" }},
		{"external nats without data dir", func(c *config.Config) { c.NATS.URL = "nats://a:4222"; c.DataDir = "" }},
		{"replicas 3 on a cluster", func(c *config.Config) { c.NATS.URL = "nats://a:4222"; c.Stream.Replicas = 3 }},
		{"user and password", func(c *config.Config) { c.NATS.User = "alice"; c.NATS.Password = "s3cret" }},
		{"token", func(c *config.Config) { c.NATS.Token = "t0ken" }},
		{"tls cert and key", func(c *config.Config) { c.NATS.TLS.Cert = "testdata/c.pem"; c.NATS.TLS.Key = "testdata/k.pem" }},
		{"http disabled", func(c *config.Config) { c.HTTP.Addr = "" }},
		{"http port 0", func(c *config.Config) { c.HTTP.Addr = "127.0.0.1:0" }},
		{"no permanent statuses", func(c *config.Config) { c.Downstream.PermanentStatuses = nil }},
		{"max ack pending equals concurrency", func(c *config.Config) { c.Consumer.MaxAckPending = c.Consumer.Concurrency }},
		{"cap equals base", func(c *config.Config) { c.Retry.Cap = c.Retry.Base }},
		{"zero max server wait", func(c *config.Config) { c.Retry.MaxServerWait = 0 }},
		{"several subjects", func(c *config.Config) { c.Stream.Subjects = []string{"meter.reads.>", "*.gas.*"} }},
		{"dlq outside a wildcard", func(c *config.Config) { c.Stream.Subjects = []string{"*.reads.>"} }},
		{"concurrency 4096", func(c *config.Config) { c.Consumer.Concurrency = 4096 }},
		{"dlq duplicates 10m", func(c *config.Config) { c.DLQ.Duplicates = 10 * time.Minute }},
		{"stream duplicates as long as its max age", func(c *config.Config) { c.Stream.Duplicates = c.Stream.MaxAge }},
		{"stream duplicates 2h on an unlimited stream", func(c *config.Config) { c.Stream.MaxAge, c.Stream.Duplicates = 0, 2*time.Hour }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mutate(&cfg)
			require.NoError(t, cfg.Validate())
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   string // the whole error, or the start of it
	}{
		{"empty stream name", func(c *config.Config) { c.Stream.Name = "" }, `stream.name ("") must be a valid JetStream name`},
		{"stream name with a dot", func(c *config.Config) { c.Stream.Name = "METER.READS" }, `stream.name ("METER.READS") must be a valid JetStream name`},
		{"stream name with a space", func(c *config.Config) { c.Stream.Name = "METER READS" }, `stream.name ("METER READS")`},
		{"stream name with a wildcard", func(c *config.Config) { c.Stream.Name = "METER*" }, `stream.name ("METER*")`},
		{"stream name with a path separator", func(c *config.Config) { c.Stream.Name = "METER/READS" }, `stream.name ("METER/READS")`},
		{"no subjects", func(c *config.Config) { c.Stream.Subjects = nil }, "stream.subjects ([]) must list at least one subject"},
		{"empty token", func(c *config.Config) { c.Stream.Subjects = []string{"meter.reads", "meter..x"} }, `stream.subjects[1] ("meter..x") must be a valid NATS subject`},
		{"> not last", func(c *config.Config) { c.Stream.Subjects = []string{"meter.>.x"} }, `stream.subjects[0] ("meter.>.x") must be a valid NATS subject`},
		{"zero replicas", func(c *config.Config) { c.Stream.Replicas = 0 }, "stream.replicas (0) must be between 1 and 5"},
		{"six replicas", func(c *config.Config) { c.NATS.URL = "nats://a:4222"; c.Stream.Replicas = 6 }, "stream.replicas (6) must be between 1 and 5"},
		{"replicas on the embedded server", func(c *config.Config) { c.Stream.Replicas = 3 }, "stream.replicas (3) must be 1 when nats.url is empty"},
		{"bad durable", func(c *config.Config) { c.Consumer.Durable = "meter.consumer" }, `consumer.durable ("meter.consumer") must be a valid JetStream name`},
		{"empty durable", func(c *config.Config) { c.Consumer.Durable = "" }, `consumer.durable ("")`},
		{"zero concurrency", func(c *config.Config) { c.Consumer.Concurrency = 0 }, "consumer.concurrency (0) must be >= 1"},
		{"huge concurrency", func(c *config.Config) { c.Consumer.Concurrency = 5000; c.Consumer.MaxAckPending = 5000 }, "consumer.concurrency (5000) must be <= 4096"},
		{"short ack wait", func(c *config.Config) {
			c.Consumer.AckWait = 500 * time.Millisecond
			c.Consumer.HandlerTimeout = 300 * time.Millisecond
			c.Downstream.Timeout = 50 * time.Millisecond
		}, "consumer.ack_wait (500ms) must be >= 1s"},
		{"handler timeout too short to call", func(c *config.Config) {
			c.Consumer.HandlerTimeout = 100 * time.Millisecond
			c.Downstream.Timeout = 50 * time.Millisecond
		}, "consumer.handler_timeout (100ms) must be >= 200ms"},
		{"max ack pending below concurrency", func(c *config.Config) { c.Consumer.MaxAckPending = 10 }, "consumer.max_ack_pending (10) must be >= consumer.concurrency (32): every read in flight, one waiting out a retry delay included, holds an ack-pending slot"},
		{"zero handler timeout", func(c *config.Config) { c.Consumer.HandlerTimeout = 0 }, "consumer.handler_timeout (0s) must be > 0"},
		{"handler timeout not below ack wait", func(c *config.Config) { c.Consumer.HandlerTimeout = 30 * time.Second }, "consumer.handler_timeout (30s) must be < consumer.ack_wait (30s)"},
		{"zero retry base", func(c *config.Config) { c.Retry.Base = 0 }, "retry.base (0s) must be > 0"},
		{"cap below base", func(c *config.Config) { c.Retry.Cap = 100 * time.Millisecond }, "retry.cap (100ms) must be >= retry.base (500ms)"},
		{"zero max attempts", func(c *config.Config) { c.Retry.MaxAttempts = 0 }, "retry.max_attempts (0) must be >= 1"},
		{"negative max server wait", func(c *config.Config) { c.Retry.MaxServerWait = -time.Second }, "retry.max_server_wait (-1s) must be >= 0"},
		{"empty dlq stream", func(c *config.Config) { c.DLQ.Stream = "" }, `dlq.stream ("") must be a valid JetStream name`},
		{"dlq stream with a dot", func(c *config.Config) { c.DLQ.Stream = "METER.DLQ" }, `dlq.stream ("METER.DLQ") must be a valid JetStream name`},
		{"dlq stream is the stream", func(c *config.Config) { c.DLQ.Stream = c.Stream.Name }, `dlq.stream ("METER_READS") must differ from stream.name`},
		{"dlq prefix with a wildcard", func(c *config.Config) { c.DLQ.Prefix = "meter.*" }, `dlq.prefix ("meter.*") must be a subject prefix without wildcards`},
		{"empty dlq prefix", func(c *config.Config) { c.DLQ.Prefix = "" }, `dlq.prefix ("") must be a subject prefix without wildcards`},
		{"dlq prefix ending in a dot", func(c *config.Config) { c.DLQ.Prefix = "meter.dlq." }, `dlq.prefix ("meter.dlq.")`},
		{"dlq overlaps the subjects", func(c *config.Config) { c.Stream.Subjects = []string{"meter.>"} }, `dlq.prefix ("meter.dlq"): dead-letter subjects "meter.dlq.>" overlap stream.subjects "meter.>", so a dead-letter copy would be consumed again`},
		{"dlq overlaps a wildcard", func(c *config.Config) { c.Stream.Subjects = []string{"meter.reads.>", "*.dlq.>"} }, `dlq.prefix ("meter.dlq"): dead-letter subjects "meter.dlq.>" overlap stream.subjects "*.dlq.>"`},
		{"short dlq duplicates", func(c *config.Config) { c.DLQ.Duplicates = time.Minute }, "dlq.duplicates (1m) must be >= 10m"},
		{"no stream duplicates", func(c *config.Config) { c.Stream.Duplicates = 0 }, "stream.duplicates (0s) must be > 0"},
		{"stream duplicates past its max age", func(c *config.Config) { c.Stream.MaxAge, c.Stream.Duplicates = time.Hour, 2*time.Hour }, "stream.duplicates (2h) must be <= stream.max_age (1h): the server refuses a longer window; shorten it or raise stream.max_age"},
		{"no downstream url", func(c *config.Config) { c.Downstream.URL = "" }, `downstream.url ("") is required unless demo is set`},
		{"relative downstream url", func(c *config.Config) { c.Downstream.URL = "/reads" }, `downstream.url ("/reads") must be an absolute http:// or https:// URL`},
		{"ftp downstream url", func(c *config.Config) { c.Downstream.URL = "ftp://host/reads" }, `downstream.url ("ftp://host/reads") must be an absolute http:// or https:// URL`},
		{"bad downstream url in demo", func(c *config.Config) { c.Demo = true; c.Downstream.URL = "localhost:9090" }, `downstream.url ("localhost:9090")`},
		{"demo incidents without demo", func(c *config.Config) { c.DemoIncidents = true }, "demo_incidents (true) needs demo"},
		{"demo incidents with a downstream", func(c *config.Config) { c.Demo = true; c.DemoIncidents = true }, `demo_incidents (true) needs downstream.url empty ("http://127.0.0.1:9090/reads")`},
		{"zero downstream timeout", func(c *config.Config) { c.Downstream.Timeout = 0 }, "downstream.timeout (0s) must be > 0"},
		{"downstream timeout not below handler timeout", func(c *config.Config) { c.Downstream.Timeout = 6 * time.Second }, "downstream.timeout (6s) must be < consumer.handler_timeout (6s)"},
		{"negative pull batch", func(c *config.Config) { c.Consumer.PullBatch = -1 }, "consumer.pull_batch (-1) must be >= 0"},
		{"pull batch too deep for the ack wait", func(c *config.Config) { c.Consumer.PullBatch = 160 }, "consumer.pull_batch (160) / consumer.concurrency (32) rounds of consumer.handler_timeout (6s) = 30s must be < consumer.ack_wait (30s)"},
		{"2xx permanent status", func(c *config.Config) { c.Downstream.PermanentStatuses = []int{400, 200} }, "downstream.permanent_statuses[1] (200) must be between 400 and 599"},
		{"600 permanent status", func(c *config.Config) { c.Downstream.PermanentStatuses = []int{600} }, "downstream.permanent_statuses[0] (600) must be between 400 and 599"},
		{"http addr without port", func(c *config.Config) { c.HTTP.Addr = "8080" }, `http.addr ("8080") must be host:port`},
		{"http addr with a bad port", func(c *config.Config) { c.HTTP.Addr = ":99999" }, `http.addr (":99999") must be host:port`},
		{"pprof addr without port", func(c *config.Config) { c.HTTP.PprofAddr = "6060" }, `http.pprof_addr ("6060") must be host:port`},
		{"pprof addr on the metrics port", func(c *config.Config) { c.HTTP.PprofAddr = "127.0.0.1:8080" }, `http.pprof_addr ("127.0.0.1:8080") must not share http.addr's port (":8080")`},
		{"log format", func(c *config.Config) { c.Log.Format = "xml" }, `log.format ("xml") must be one of auto, text, json`},
		{"log level", func(c *config.Config) { c.Log.Level = "verbose" }, `log.level ("verbose") must be one of debug, info, warn, error`},
		{"zero shutdown timeout", func(c *config.Config) { c.Shutdown.Timeout = 0 }, "shutdown.timeout (0s) must be > 0"},
		{"no data dir for the embedded server", func(c *config.Config) { c.DataDir = "" }, `data_dir ("") must be set when nats.url is empty`},
		{"http nats url", func(c *config.Config) { c.NATS.URL = "http://a:4222" }, `nats.url ("http://a:4222") must be a comma-separated list of nats://, tls://, ws:// or wss:// URLs`},
		{"nats url without a scheme", func(c *config.Config) { c.NATS.URL = "localhost:4222" }, `nats.url ("localhost:4222")`},
		{"bad url in a nats list", func(c *config.Config) { c.NATS.URL = "nats://a:4222,,nats://b:4222" }, `nats.url ("nats://a:4222,,nats://b:4222")`},
		{"user without password", func(c *config.Config) { c.NATS.User = "alice" }, `nats.user ("alice") is set but nats.password is empty`},
		{"password without user", func(c *config.Config) { c.NATS.Password = "s3cret" }, "nats.password is set but nats.user is empty"},
		{"token and user", func(c *config.Config) { c.NATS.Token = "t0ken"; c.NATS.User = "alice"; c.NATS.Password = "s3cret" }, `nats.token and nats.user ("alice") are both set`},
		{"overlapping subjects", func(c *config.Config) { c.Stream.Subjects = []string{"meter.reads.>", "meter.reads.x"} },
			`stream.subjects[1] ("meter.reads.x") overlaps stream.subjects[0] ("meter.reads.>")`},
		{"nats port out of range", func(c *config.Config) { c.NATS.URL = "nats://h1:99999" }, `nats.url ("nats://h1:99999") must be`},
		{"downstream port out of range", func(c *config.Config) { c.Downstream.URL = "http://x:99999999/reads" }, `downstream.url`},
		{"nats creds missing", func(c *config.Config) { c.NATS.Creds = "testdata/missing.creds" }, `nats.creds ("testdata/missing.creds") cannot be read: no such file or directory`},
		{"nkey seed missing", func(c *config.Config) { c.NATS.NKeySeed = "testdata/missing.nk" }, `nats.nkey_seed ("testdata/missing.nk") cannot be read: no such file or directory`},
		{"tls cert without key", func(c *config.Config) { c.NATS.TLS.Cert = "testdata/c.pem" }, `nats.tls.cert ("testdata/c.pem") is set but nats.tls.key is empty`},
		{"tls key without cert", func(c *config.Config) { c.NATS.TLS.Key = "testdata/k.pem" }, `nats.tls.key ("testdata/k.pem") is set but nats.tls.cert is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mutate(&cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.ErrorIs(t, err, config.ErrInvalid)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, 1, "one problem, one line: %v", err)
			assert.True(t, strings.HasPrefix(lines[0], tt.want), "got  %s\nwant %s...", lines[0], tt.want)
			assert.NotContains(t, err.Error(), "s3cret")
			assert.NotContains(t, err.Error(), "t0ken")
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := valid()
	cfg.Consumer.Concurrency = 0
	cfg.Retry.Cap = 100 * time.Millisecond
	cfg.Stream.Subjects = []string{"meter.>"}
	cfg.Log.Level = "loud"
	cfg.Downstream.URL = ""

	err := cfg.Validate()
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		"consumer.concurrency (0) must be >= 1",
		"retry.cap (100ms) must be >= retry.base (500ms)",
		`dlq.prefix ("meter.dlq"): dead-letter subjects "meter.dlq.>" overlap stream.subjects "meter.>", so a dead-letter copy would be consumed again; choose a prefix outside the consumed subjects`,
		`downstream.url ("") is required unless demo is set`,
		`log.level ("loud") must be one of debug, info, warn, error`,
	}, "\n"), err.Error())

	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
	for _, e := range joined.Unwrap() {
		assert.ErrorIs(t, e, config.ErrInvalid)
	}
}

func TestValidateAgreesWithRetryPolicy(t *testing.T) {
	cfg := valid()
	cfg.Retry = config.Retry{Cap: -1, MaxServerWait: -1}
	err := cfg.Validate()
	require.Error(t, err)
	require.Error(t, cfg.Retry.Policy().Validate())
	for _, field := range []string{"retry.base", "retry.cap", "retry.max_attempts", "retry.max_server_wait"} {
		assert.Contains(t, err.Error(), field)
	}
}
