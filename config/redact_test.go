package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

const (
	password = "pa55-hunter2"
	token    = "tok-0xDEADBEEF"
	urlPass  = "url-pw-s3cret"
	urlToken = "url-tok-s3cret"
)

var secrets = []string{password, token, urlPass, urlToken}

// withSecrets returns a config holding every kind of secret; it is invalid
// in several ways (token with user, bad URLs) so errors can be checked too.
func withSecrets() config.Config {
	cfg := valid()
	cfg.NATS.URL = "nats://alice:" + urlPass + "@a:4222,http://" + urlToken + "@b:4222"
	cfg.NATS.User = "alice"
	cfg.NATS.Password = password
	cfg.NATS.Token = token
	cfg.NATS.Creds = "/etc/nats/user.creds"
	cfg.Downstream.URL = "ftp://bob:" + urlPass + "@downstream/reads"
	return cfg
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range secrets {
		assert.NotContains(t, s, secret, what)
	}
}

func TestRedacted(t *testing.T) {
	cfg := withSecrets()
	r := cfg.Redacted()
	assert.Equal(t, "REDACTED", r.NATS.Password)
	assert.Equal(t, "REDACTED", r.NATS.Token)
	assert.Equal(t, "nats://alice:REDACTED@a:4222,http://REDACTED@b:4222", r.NATS.URL)
	assert.Equal(t, "ftp://bob:REDACTED@downstream/reads", r.Downstream.URL)
	assert.Equal(t, "alice", r.NATS.User, "a user is not a secret")
	assert.Equal(t, "/etc/nats/user.creds", r.NATS.Creds, "a path to credentials is not a secret")
	assert.Equal(t, password, cfg.NATS.Password, "the original is unchanged")

	r.Stream.Subjects[0] = "changed"
	assert.Equal(t, "meter.reads.>", cfg.Stream.Subjects[0], "the copy shares no slices")

	empty := valid().Redacted()
	assert.Empty(t, empty.NATS.Password, "an unset secret stays empty")
	assert.Empty(t, empty.NATS.Token)
}

func TestRedactURL(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{"", ""},
		{"nats://a:4222", "nats://a:4222"},
		{"nats://u:p@a:4222", "nats://u:REDACTED@a:4222"},
		{"nats://tok@a:4222", "nats://REDACTED@a:4222"},
		{"nats://u:p@ss@a:4222/x?y=@z", "nats://u:REDACTED@a:4222/x?y=@z"},
		{"nats://u:p w@a:4222", "nats://u:REDACTED@a:4222"}, // does not parse as a URL
		{"nats://a:4222,nats://u:p@b:4222", "nats://a:4222,nats://u:REDACTED@b:4222"},
		{"https://host/path@v1", "https://host/path@v1"},
		{"u:p@a:4222", "u:REDACTED@a:4222"}, // no scheme: refused, and quoted in the refusal
		{"tok@a:4222", "REDACTED@a:4222"},
		{"a:4222", "a:4222"},
		{"nats://a:4222?token=t1", "nats://a:4222?token=REDACTED"}, // a query, without user info
		{"tls://a:4222?password=p1,nats://b:4222", "tls://a:4222?password=REDACTED,nats://b:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			cfg := config.Config{NATS: config.NATS{URL: tt.give}}
			assert.Equal(t, tt.want, cfg.Redacted().NATS.URL)
		})
	}
}

func TestRedactURLQuery(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{"http://bob:pw@e:8080/x?api_key=qtok", "http://bob:REDACTED@e:8080/x?api_key=REDACTED"},
		{"https://e/rate?tenant=north&token=t1&v=2", "https://e/rate?tenant=north&token=REDACTED&v=2"},
		{"https://e/r?X-Amz-Credential=c&X-Amz-Signature=s&sig=z#top", "https://e/r?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&sig=REDACTED#top"},
		{"https://e/r?access_token", "https://e/r?access_token"}, // no value to hide
		{"https://e/r?q=1", "https://e/r?q=1"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			cfg := config.Config{Downstream: config.Downstream{URL: tt.give}}
			assert.Equal(t, tt.want, cfg.Redacted().Downstream.URL)
		})
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	cfg := withSecrets()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
		t.Run(verb, func(t *testing.T) {
			out := fmt.Sprintf(verb, cfg)
			assertNoSecret(t, out, out)
			assert.Contains(t, out, "REDACTED")
			assertNoSecret(t, "NATS section", fmt.Sprintf(verb, cfg.NATS))
			assertNoSecret(t, "pointer", fmt.Sprintf(verb, &cfg))
			assertNoSecret(t, "in a slice", fmt.Sprintf(verb, []config.Config{cfg}))
		})
	}
	assertNoSecret(t, "String", cfg.String())
	assertNoSecret(t, "Redacted", fmt.Sprintf("%#v", struct{ N config.NATS }{cfg.Redacted().NATS}))
}

func TestSecretsNeverLogged(t *testing.T) {
	cfg := withSecrets()
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(h(&buf))
			log.Info("starting", "config", cfg, "nats", cfg.NATS, slog.Any("ptr", &cfg))
			assertNoSecret(t, buf.String(), buf.String())
			assert.Contains(t, buf.String(), "REDACTED")
		})
	}
}

func TestLogValueJSON(t *testing.T) {
	cfg := valid()
	cfg.NATS.Token = token
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", cfg)

	var rec struct {
		Config map[string]any `json:"config"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	nats := rec.Config["nats"].(map[string]any)
	assert.Equal(t, "REDACTED", nats["token"])
	assert.Equal(t, "meter-consumer", nats["name"])
	assert.Equal(t, map[string]any{"ca": "", "cert": "", "key": ""}, nats["tls"])
	consumer := rec.Config["consumer"].(map[string]any)
	assert.Equal(t, "30s", consumer["ack_wait"])
	assert.InDelta(t, 32, consumer["concurrency"], 0)
	assert.Equal(t, []any{"meter.reads.>"}, rec.Config["stream"].(map[string]any)["subjects"])
	assert.Equal(t, "./data", rec.Config["data_dir"])
	assert.Equal(t, false, rec.Config["demo"])
}

func TestSecretsNeverInErrors(t *testing.T) {
	err := withSecrets().Validate()
	require.Error(t, err)
	assertNoSecret(t, "validate", err.Error())
	for _, field := range []string{"nats.url", "nats.token", "downstream.url"} {
		assert.Contains(t, err.Error(), field)
	}

	_, err = config.Load([]string{"--demo"}, env(map[string]string{
		"NATS_PASSWORD": password,
		"NATS_URL":      "nats://alice:" + urlPass + "@a:4222,bogus",
	}))
	require.Error(t, err)
	assertNoSecret(t, "load", err.Error())
	assert.Contains(t, err.Error(), "nats.password is set but nats.user is empty")
	assert.Contains(t, err.Error(), "nats://alice:REDACTED@a:4222,bogus")

	path := writeFile(t, "nats:\n  password: "+password+"\n  pasword: x\n")
	_, err = config.Load([]string{"--config", path}, nil)
	require.Error(t, err)
	assertNoSecret(t, "file", err.Error())
}

func TestSecretsNeverInDocs(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf)
	for _, doc := range []string{buf.String(), config.Reference()} {
		assert.Contains(t, doc, "NATS_PASSWORD")
		assert.NotContains(t, doc, "--nats-password")
		assert.NotContains(t, doc, "--nats-token")
	}
	assert.True(t, strings.Contains(config.Reference(), "|  | `NATS_TOKEN` | `nats.token` |  |"), "no flag and no default for a secret")
}

// A URL that validation refuses is quoted in the refusal, redacted: the
// password of a NATS URL written without its scheme never reaches the error
// (nor the log line that carries it).
func TestARefusedURLIsQuotedRedacted(t *testing.T) {
	cfg := valid()
	cfg.NATS.URL = "u:s3cretNoScheme@h1:4222,nats://h2:4222?token=s3cretQuery"
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nats.url (")
	assert.NotContains(t, err.Error(), "s3cretNoScheme")
	assert.NotContains(t, err.Error(), "s3cretQuery")
}
