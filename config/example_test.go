package config_test

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/meterline/meter-consumer/config"
)

func ExampleLoad() {
	env := map[string]string{
		"CONSUMER_DOWNSTREAM_URL": "http://127.0.0.1:9090/reads",
		"CONSUMER_CONCURRENCY":    "16",
		"CONSUMER_ACK_WAIT":       "45s",
	}
	args := []string{"--concurrency", "8", "--subjects", "meter.reads.>,meter.backfill.>"}

	cfg, err := config.Load(args, func(k string) string { return env[k] })
	if errors.Is(err, flag.ErrHelp) {
		config.Usage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Consumer.Concurrency, cfg.Consumer.AckWait, cfg.Stream.Subjects)
	fmt.Println(cfg.Downstream.URL)
	// Output:
	// 8 45s [meter.reads.> meter.backfill.>]
	// http://127.0.0.1:9090/reads
}

func ExampleConfig_Validate() {
	cfg := config.Default()
	cfg.Downstream.URL = "http://127.0.0.1:9090/reads"
	cfg.Consumer.Concurrency = 0
	cfg.Retry.Cap = 100 * time.Millisecond
	cfg.Stream.Subjects = []string{"meter.>"}
	fmt.Println(cfg.Validate())
	// Output:
	// consumer.concurrency (0) must be >= 1
	// retry.cap (100ms) must be >= retry.base (500ms)
	// dlq.prefix ("meter.dlq"): dead-letter subjects "meter.dlq.>" overlap stream.subjects "meter.>", so a dead-letter copy would be consumed again; choose a prefix outside the consumed subjects
}

func ExampleConfig_LogValue() {
	cfg := config.Default()
	cfg.NATS.URL = "nats://alice:hunter2@nats.internal:4222"
	cfg.NATS.User, cfg.NATS.Password = "alice", "hunter2"

	// Drop the time so the output is stable.
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	log.Info("connecting", "nats", cfg.NATS)
	// Output:
	// level=INFO msg=connecting nats.url=nats://alice:REDACTED@nats.internal:4222 nats.creds="" nats.user=alice nats.password=REDACTED nats.token="" nats.nkey_seed="" nats.tls.ca="" nats.tls.cert="" nats.tls.key="" nats.inbox_prefix="" nats.listen=127.0.0.1:4222 nats.embedded=true nats.connect_retry_max=30s nats.name=meter-consumer
}

func ExampleDownstream_Access() {
	env := map[string]string{
		"CONSUMER_DOWNSTREAM_URL":     "https://rate-engine.billing.svc/reads",
		"CONSUMER_DOWNSTREAM_HEADERS": "X-Tenant: north\nX-Region: eu-west",
	}
	args := []string{"--downstream-ca", "consumer.example.yaml"} // a file, but no certificate in it
	_, err := config.Load(args, func(k string) string { return env[k] })
	fmt.Println(err)

	cfg, _ := config.Load(nil, func(k string) string { return env[k] })
	a := cfg.Downstream.Access() // downstream.HTTPOptions{..., Access: a}
	fmt.Println(a.Headers, a.ReloadInterval, a.TokenFile == "")
	// Output:
	// invalid configuration:
	// downstream.tls.ca ("consumer.example.yaml"): CA file consumer.example.yaml: no PEM certificate in it
	// map[X-Region:eu-west X-Tenant:north] 10s true
}

func ExampleFlag() {
	fmt.Println(config.Flag("stream.reconcile"), config.Env("stream.reconcile"))
	fmt.Println(config.Flag("nats.password") == "", config.Env("nats.password"))
	fmt.Println(config.Flag("no.such.setting") == "", config.Env("no.such.setting") == "")
	// Output:
	// --reconcile CONSUMER_RECONCILE
	// true NATS_PASSWORD
	// true true
}
