package config_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes a YAML file in a temporary directory and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "consumer.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

const downstream = "http://127.0.0.1:9090/reads"

func TestLoadDefaults(t *testing.T) {
	cfg, err := config.Load([]string{"--downstream-url", downstream}, nil)
	require.NoError(t, err)
	assert.Equal(t, valid(), cfg)
}

func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, `
consumer:
  ack_wait: 40s
  concurrency: 8
stream:
  subjects: [file.a, file.b]
  create: true
downstream:
  url: http://file/reads
`)
	fileEnv := map[string]string{"CONSUMER_CONFIG": file}
	allEnv := map[string]string{
		"CONSUMER_CONFIG":         file,
		"CONSUMER_ACK_WAIT":       "50s",
		"CONSUMER_CONCURRENCY":    "16",
		"CONSUMER_SUBJECTS":       "env.a, env.b",
		"CONSUMER_CREATE_STREAMS": "false",
	}
	flags := []string{"--ack-wait=1m", "--concurrency", "24", "--subjects", "flag.a,flag.b,flag.c", "--create-streams"}

	type want struct {
		ackWait     time.Duration
		concurrency int
		subjects    []string
		create      bool
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want want
	}{
		{"default", []string{"--downstream-url", downstream}, nil, want{30 * time.Second, 32, []string{"meter.reads.>"}, false}},
		{"file over default", nil, fileEnv, want{40 * time.Second, 8, []string{"file.a", "file.b"}, true}},
		{"env over file", nil, allEnv, want{50 * time.Second, 16, []string{"env.a", "env.b"}, false}},
		{"flag over env", flags, allEnv, want{time.Minute, 24, []string{"flag.a", "flag.b", "flag.c"}, true}},
		{"flag over file, --config flag", append([]string{"--config", file, "--create-streams=false"}, flags[:3]...), nil, want{time.Minute, 24, []string{"file.a", "file.b"}, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(tt.args, env(tt.env))
			require.NoError(t, err)
			got := want{cfg.Consumer.AckWait, cfg.Consumer.Concurrency, cfg.Stream.Subjects, cfg.Stream.Create}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLoadFlagNotGivenKeepsEnv(t *testing.T) {
	// A flag's default must not undo the environment: only given flags count.
	cfg, err := config.Load([]string{"--concurrency", "4"}, env(map[string]string{
		"CONSUMER_DOWNSTREAM_URL": downstream,
		"CONSUMER_LOG_LEVEL":      "debug",
		"CONSUMER_MAX_ATTEMPTS":   "3",
	}))
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.Consumer.Concurrency)
	assert.Equal(t, "debug", cfg.Log.Level)
	assert.Equal(t, 3, cfg.Retry.MaxAttempts)
	assert.Equal(t, downstream, cfg.Downstream.URL)
}

func TestLoadEveryEnvAndFlag(t *testing.T) {
	cfg, err := config.Load([]string{
		"--nats-url", "nats://a:4222,nats://b:4222", "--nats-creds", "testdata/u.creds",
		"--stream", "S", "--durable", "D", "--replicas", "3", "--dlq-stream", "SD",
		"--dlq-prefix", "dead", "--dlq-duplicates", "1h", "--downstream-timeout", "2s",
		"--permanent-statuses", "400, 422", "--ack-wait", "1m", "--max-ack-pending", "64",
		"--handler-timeout", "20s", "--retry-base", "1s", "--retry-cap", "1m",
		"--max-server-wait", "0s", "--http-addr", "", "--log-format", "json",
		"--shutdown-timeout", "5s", "--data-dir", "", "--demo",
	}, env(map[string]string{
		"NATS_USER":     "alice",
		"NATS_PASSWORD": "s3cret",
		"NATS_NKEY":     "testdata/seed.nk",
		"NATS_CA":       "testdata/ca.pem",
		"NATS_CERT":     "testdata/c.pem",
		"NATS_KEY":      "testdata/k.pem",
	}))
	require.NoError(t, err)

	want := config.Default()
	want.NATS = config.NATS{
		URL: "nats://a:4222,nats://b:4222", Creds: "testdata/u.creds", User: "alice", Password: "s3cret",
		NKeySeed: "testdata/seed.nk", TLS: config.TLS{CA: "testdata/ca.pem", Cert: "testdata/c.pem", Key: "testdata/k.pem"}, Name: "meter-consumer", Listen: "127.0.0.1:4222", Embedded: true, ConnectRetryMax: 30 * time.Second,
	}
	want.Stream.Name, want.Consumer.Durable, want.Stream.Replicas = "S", "D", 3
	want.DLQ = config.DLQ{Stream: "SD", Prefix: "dead", Duplicates: time.Hour, MaxBytes: 1 << 30}
	want.Downstream.Timeout, want.Downstream.PermanentStatuses = 2*time.Second, []int{400, 422}
	want.Consumer.AckWait, want.Consumer.MaxAckPending, want.Consumer.HandlerTimeout = time.Minute, 64, 20*time.Second
	want.Retry.Base, want.Retry.Cap, want.Retry.MaxServerWait = time.Second, time.Minute, 0
	want.HTTP.Addr, want.Log.Format, want.Shutdown.Timeout, want.DataDir, want.Demo = "", "json", 5*time.Second, "", true
	assert.Equal(t, want, cfg)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	unknown := writeFile(t, "consumer:\n  concurrency: 4\n  ack_wiat: 10s\nstreams:\n  name: X\n")
	badType := writeFile(t, "consumer:\n  ack_wait: 30\n")
	badYAML := writeFile(t, "consumer: [\n")
	leafAsMap := writeFile(t, "http:\n  addr:\n    port: 80\n")
	badScalars := writeFile(t, "retry:\n  max_attempts: 1.9\nconsumer:\n  concurrency: 5.5\nbreaker:\n  enabled: maybe\n")

	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // each must be in the error
	}{
		{"missing file", []string{"--config", missing}, nil, []string{"config file", missing, "no such file"}},
		{"missing file from env", nil, map[string]string{"CONSUMER_CONFIG": missing}, []string{missing}},
		{"unknown yaml keys", []string{"--config", unknown}, nil, []string{
			"config file " + unknown,
			`line 3: unknown key "consumer.ack_wiat" (valid keys here: durable, concurrency, ack_wait, max_ack_pending, pull_batch, handler_timeout, records_bucket)`,
			`line 4: unknown key "streams"`,
		}},
		{"yaml duration as a number", []string{"--config", badType}, nil, []string{"config file " + badType,
			`line 2: consumer.ack_wait ("30"): want a duration such as "500ms", "30s" or "5m"`}},
		{"yaml fraction for a whole number, a word for a switch", []string{"--config", badScalars}, nil, []string{
			`line 2: retry.max_attempts ("1.9"): want an integer`,
			`line 4: consumer.concurrency ("5.5"): want an integer`,
			`line 6: breaker.enabled ("maybe"): want true or false`}},
		{"broken yaml", []string{"--config", badYAML}, nil, []string{"config file " + badYAML}},
		{"yaml map for a value", []string{"--config", leafAsMap}, nil, []string{"config file " + leafAsMap, "line 3: cannot unmarshal"}},
		{"bad env duration", nil, map[string]string{"CONSUMER_ACK_WAIT": "30"}, []string{
			`environment CONSUMER_ACK_WAIT="30": want a duration such as "500ms", "30s" or "5m"`,
		}},
		{"bad env values, all reported", nil, map[string]string{
			"CONSUMER_MAX_ATTEMPTS":       "six",
			"CONSUMER_DEMO":               "maybe",
			"CONSUMER_PERMANENT_STATUSES": "400,4o4",
		}, []string{
			`environment CONSUMER_MAX_ATTEMPTS="six": want an integer`,
			`environment CONSUMER_DEMO="maybe": want true or false`,
			`environment CONSUMER_PERMANENT_STATUSES="400,4o4": want comma-separated integers`,
		}},
		{"bad flag value", []string{"--retry-cap", "soon"}, nil, []string{
			`invalid value "soon" for flag -retry-cap: want a duration such as "500ms", "30s" or "5m"`,
		}},
		{"bad bool flag", []string{"--demo=perhaps"}, nil, []string{`"perhaps"`, "-demo"}},
		{"unknown flag", []string{"--concurency", "4"}, nil, []string{"flag provided but not defined: -concurency"}},
		{"secret is not a flag", []string{"--nats-password", "s3cret"}, nil, []string{"not defined: -nats-password"}},
		{"positional argument", []string{"--demo", "extra"}, nil, []string{`unexpected argument "extra"`}},
		{"the file's, the environment's and the validation's problems at once", []string{"--config", unknown, "--retry-cap", "100ms"},
			map[string]string{"CONSUMER_ACK_WAIT": "30"}, []string{
				`unknown key "consumer.ack_wiat"`,
				`environment CONSUMER_ACK_WAIT="30"`,
				"retry.cap (100ms) must be >= retry.base (500ms)",
			}},
		{"invalid result", []string{"--concurrency", "0"}, nil, []string{
			"invalid configuration:\n",
			"consumer.concurrency (0) must be >= 1",
			"downstream.url",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(tt.args, env(tt.env))
			require.Error(t, err)
			assert.Equal(t, config.Config{}, cfg)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestLoadHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		t.Run(arg, func(t *testing.T) {
			_, err := config.Load([]string{"--concurrency", "4", arg}, nil)
			require.ErrorIs(t, err, flag.ErrHelp)
		})
	}
}

func TestLoadEmptyFile(t *testing.T) {
	path := writeFile(t, "# nothing set\n")
	cfg, err := config.Load([]string{"--config", path, "--demo"}, nil)
	require.NoError(t, err)
	want := config.Default()
	want.Demo = true
	assert.Equal(t, want, cfg)
}

func TestLoadFileNullList(t *testing.T) {
	path := writeFile(t, "stream:\n  subjects:\n")
	_, err := config.Load([]string{"--config", path, "--demo"}, nil)
	require.ErrorContains(t, err, "stream.subjects ([]) must list at least one subject")
}

func TestLoadExampleFile(t *testing.T) {
	cfg, err := config.Load([]string{"--config", "consumer.example.yaml"}, nil)
	require.NoError(t, err)
	assert.Equal(t, valid(), cfg, "the example sets only downstream.url apart from the defaults")
}

func TestLoadErrorsWrap(t *testing.T) {
	_, err := config.Load([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, nil)
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = config.Load([]string{"--concurrency", "0", "--demo"}, nil)
	require.ErrorIs(t, err, config.ErrInvalid)
	assert.False(t, errors.Is(err, flag.ErrHelp))
}

// YAML merge keys (<<) are read as the keys they merge: a misspelt key in a
// merged mapping is refused with its line, and a setting given by a merge
// counts as given (a derived default does not override it).
func TestMergeKeysAreReadAsTheirKeys(t *testing.T) {
	t.Run("a misspelt merged key", func(t *testing.T) {
		path := writeFile(t, "base: &base\n  ack_wiat: 30s\nconsumer:\n  <<: *base\n")
		_, err := config.Load([]string{"--config", path, "--downstream-url", downstream}, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `unknown key "base"`)
	})
	t.Run("a merged mapping's unknown key", func(t *testing.T) {
		path := writeFile(t, "consumer:\n  <<: {ack_wiat: 30s}\n")
		_, err := config.Load([]string{"--config", path, "--downstream-url", downstream}, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `line 2: unknown key "consumer.ack_wiat"`)
	})
	t.Run("a merged setting counts as given", func(t *testing.T) {
		path := writeFile(t, "consumer:\n  <<: {ack_wait: 40s, handler_timeout: 10s}\n")
		cfg, err := config.Load([]string{"--config", path, "--downstream-url", downstream}, nil)
		require.NoError(t, err)
		assert.Equal(t, 40*time.Second, cfg.Consumer.AckWait, "given by the merge, not derived from the handler timeout")
	})
}

// A switch in the file takes the words the YAML decoder takes (YAML 1.1's
// yes, no, on and off too), as it did before the file's switches were
// checked ahead of the decoder.
func TestLoadFileSwitchWords(t *testing.T) {
	file := writeFile(t, "breaker:\n  enabled: no\ndownstream:\n  adaptive: On\n")
	cfg, err := config.Load([]string{"--config", file, "--downstream-url", "http://engine/reads"}, nil)
	require.NoError(t, err)
	assert.False(t, cfg.Breaker.Enabled)
	assert.True(t, cfg.Downstream.Adaptive)
}

// A file is one YAML document: the decoder reads the first only, so the
// settings after a --- were dropped without a word.
func TestLoadFileOfTwoDocumentsIsRefused(t *testing.T) {
	file := writeFile(t, "consumer:\n  concurrency: 8\n---\nretry:\n  max_attempts: 2\n")
	_, err := config.Load([]string{"--config", file, "--downstream-url", "http://engine/reads"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a second YAML document (after ---): the file is one document")
	for _, body := range []string{"", "# only a comment\n", "---\nconsumer:\n  concurrency: 8\n", "consumer:\n  concurrency: 8\n---\n"} {
		_, err := config.Load([]string{"--config", writeFile(t, body), "--downstream-url", "http://engine/reads"}, nil)
		assert.NoError(t, err, "%q", body)
	}
}
