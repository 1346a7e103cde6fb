package config

import (
	"github.com/meterline/meter-consumer/internal/classify"
	"maps"
	"time"

	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Config is every setting of the consumer binary. The zero value is not
// usable; start from [Default] or [Load].
type Config struct {
	NATS       NATS       `yaml:"nats"`
	Stream     Stream     `yaml:"stream"`
	Consumer   Consumer   `yaml:"consumer"`
	Retry      Retry      `yaml:"retry"`
	Breaker    Breaker    `yaml:"breaker"`
	DLQ        DLQ        `yaml:"dlq"`
	Downstream Downstream `yaml:"downstream"`
	HTTP       HTTP       `yaml:"http"`
	Log        Log        `yaml:"log"`
	Shutdown   Shutdown   `yaml:"shutdown"`
	DataDir    string     `yaml:"data_dir"` // store of the embedded server
	Demo       bool       `yaml:"demo"`     // no downstream needed
	// DemoIncidents puts the demo's rate engine through an overload and an
	// outage now and then; it needs Demo and no downstream URL.
	DemoIncidents bool `yaml:"demo_incidents"`
}

// NATS is how to reach the NATS server.
type NATS struct {
	URL      string `yaml:"url"`       // "" starts an embedded server; comma-separated list allowed
	Creds    string `yaml:"creds"`     // path to a .creds file
	User     string `yaml:"user"`      // with Password
	Password string `yaml:"password"`  // secret
	Token    string `yaml:"token"`     // secret
	NKeySeed string `yaml:"nkey_seed"` // path to an nkey seed file
	TLS      TLS    `yaml:"tls"`
	Name     string `yaml:"name"` // connection name shown by the server
	// InboxPrefix replaces _INBOX as the prefix of the subjects replies
	// come on, so that each user's permissions can be limited to its own
	// replies ("" keeps _INBOX).
	InboxPrefix string `yaml:"inbox_prefix"`
	// Listen is where the embedded server listens when URL is empty.
	Listen string `yaml:"listen"`
	// Embedded allows an embedded server when URL is empty (the newcomer's
	// and the demo's); a production deployment sets it false, so that a
	// missing URL stops start-up instead of falling back to it.
	Embedded bool `yaml:"embedded"`
	// ConnectRetryMax bounds the wait between two attempts to connect at
	// start (and to find the streams); the service keeps trying until it
	// can consume or is stopped.
	ConnectRetryMax time.Duration `yaml:"connect_retry_max"`
}

// TLS is the client side of a TLS connection (to NATS, to the downstream);
// every field is a path to a PEM file.
type TLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Stream is the JetStream stream the meter reads are stored in.
type Stream struct {
	Name     string   `yaml:"name"`
	Subjects []string `yaml:"subjects"`
	Create   bool     `yaml:"create"` // create the stream and the DLQ stream if missing
	Replicas int      `yaml:"replicas"`
	// MaxAge and MaxBytes bound a created stream (0: unlimited).
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes int           `yaml:"max_bytes"`
	// Duplicates is a created stream's duplicate window: a read published
	// again with the same Nats-Msg-Id within it is dropped (a head-end's
	// retry, a dead-letter replay run again).
	Duplicates time.Duration `yaml:"duplicates"`
	// Reconcile updates existing streams and the durable to these settings
	// instead of refusing a durable the service cannot run on.
	Reconcile bool `yaml:"reconcile"`
}

// Consumer is the durable pull consumer and its workers.
type Consumer struct {
	Durable        string        `yaml:"durable"`
	Concurrency    int           `yaml:"concurrency"`
	AckWait        time.Duration `yaml:"ack_wait"`
	MaxAckPending  int           `yaml:"max_ack_pending"`
	HandlerTimeout time.Duration `yaml:"handler_timeout"`
	PullBatch      int           `yaml:"pull_batch"` // messages one pull asks for; 0 = chosen from the concurrency
	// RecordsBucket keeps each read's hand-backs and dead-letter decision;
	// "" derives it from the stream and the durable.
	RecordsBucket string `yaml:"records_bucket"`
}

// Retry is the backoff applied to a read that failed transiently.
type Retry struct {
	Base          time.Duration `yaml:"base"`
	Cap           time.Duration `yaml:"cap"`
	MaxAttempts   int           `yaml:"max_attempts"`
	MaxServerWait time.Duration `yaml:"max_server_wait"`
	// BudgetPercent bounds retries to this share of the first attempts
	// over 10s (0 turns the retry budget off); BudgetMinPerSecond is the
	// floor a quiet replica may always retry at.
	BudgetPercent      int `yaml:"budget_percent"`
	BudgetMinPerSecond int `yaml:"budget_min_per_second"`
	// MaxReadAge is the age limit: past this age (from its stream
	// timestamp) a read that fails transiently is dead-lettered with reason
	// expired instead of retried. 0 turns it off.
	MaxReadAge time.Duration `yaml:"max_read_age"`
}

// RecordsTTL is how long the records bucket keeps a read's record when the
// source stream has no max age (with one, a record lives as long as the
// stream keeps its read). It is not a setting: stream.max_age bounds the
// records as it bounds the reads.
const RecordsTTL = 30 * 24 * time.Hour

// RetryBudgetWindow is the sliding window the retry budget counts first
// attempts and retries over. It is not a setting: retry.budget_percent is
// a share of the first attempts over it.
const RetryBudgetWindow = 10 * time.Second

// Policy returns the settings as a [retry.Policy].
func (r Retry) Policy() retry.Policy {
	return retry.Policy{
		Base:          r.Base,
		Cap:           r.Cap,
		MaxAttempts:   r.MaxAttempts,
		MaxServerWait: r.MaxServerWait,
	}
}

// Breaker is the circuit breaker on the downstream: when it fails as a
// whole, stop pulling and hold reads instead of spending their attempts.
type Breaker struct {
	Enabled        bool          `yaml:"enabled"`
	Window         time.Duration `yaml:"window"`          // sliding window of outcomes
	MinCalls       int           `yaml:"min_calls"`       // calls in the window before it may open
	FailurePercent int           `yaml:"failure_percent"` // share of transient failures that opens it
	CoolDown       time.Duration `yaml:"cool_down"`       // mean wait before probing, jittered ±50%
	MaxCoolDown    time.Duration `yaml:"max_cool_down"`   // bound of a cool-down that grows while probes fail
	Probes         int           `yaml:"probes"`          // calls let through when half-open
}

// DLQ is where reads that cannot be delivered are copied.
type DLQ struct {
	Stream     string        `yaml:"stream"`
	Prefix     string        `yaml:"prefix"`     // copies go to <prefix>.<original subject>
	Duplicates time.Duration `yaml:"duplicates"` // duplicate window of the DLQ stream
	MaxBytes   int           `yaml:"max_bytes"`  // bound of a created DLQ stream (0: unlimited)
}

// PublishTimeout bounds one publish round trip of a dead-letter copy: 5s.
// It is not a setting: consumer.handler_timeout bounds the whole delivery,
// the copy included.
func (DLQ) PublishTimeout() time.Duration { return 5 * time.Second }

// PublishRetry drives the in-process retries of a dead-letter copy's
// publish before the read is NAKed, to come back later: 3 attempts, 100ms
// base, 1s cap. It is not a setting.
func (DLQ) PublishRetry() retry.Policy {
	return retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3}
}

// Downstream is the HTTP service the reads are posted to.
type Downstream struct {
	URL               string        `yaml:"url"`
	Timeout           time.Duration `yaml:"timeout"`
	PermanentStatuses []int         `yaml:"permanent_statuses"`
	// Adaptive adapts the calls in flight to the rate engine's capacity,
	// up to consumer.concurrency.
	Adaptive bool `yaml:"adaptive"`
	// TokenFile is a path to a file holding the bearer token; the token
	// itself is never a setting.
	TokenFile string `yaml:"token_file"`
	// ReloadInterval bounds how often TokenFile and TLS.Cert/Key are checked
	// for a change.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	TLS            TLS           `yaml:"tls"`
	// Headers are sent on every request, name to value.
	Headers map[string]string `yaml:"headers"`
}

// Access returns the token file, TLS files and headers as the HTTP sink
// takes them: downstream.HTTPOptions{..., Access: cfg.Downstream.Access()}.
// Classifier is the HTTP classifier of PermanentStatuses, as the sink
// takes it: downstream.HTTPOptions{..., Classifier: cls}.
func (d Downstream) Classifier() (*classify.HTTP, error) {
	return classify.NewHTTP(d.PermanentStatuses, nil)
}

func (d Downstream) Access() downstream.Access {
	return downstream.Access{
		TokenFile:      d.TokenFile,
		ReloadInterval: d.ReloadInterval,
		CAFile:         d.TLS.CA,
		CertFile:       d.TLS.Cert,
		KeyFile:        d.TLS.Key,
		Headers:        maps.Clone(d.Headers),
	}
}

// HTTP is the service's own HTTP server (health and metrics).
type HTTP struct {
	Addr string `yaml:"addr"` // "" disables it
	// PprofAddr serves net/http/pprof, for diagnostics; "" (the default)
	// disables it. It is never served on Addr: profiles are not for
	// whoever scrapes the metrics.
	PprofAddr string `yaml:"pprof_addr"`
}

// Log is how the service logs.
type Log struct {
	Format string `yaml:"format"` // auto, text or json
	Level  string `yaml:"level"`  // debug, info, warn or error
}

// Shutdown bounds a graceful stop.
type Shutdown struct {
	Timeout time.Duration `yaml:"timeout"`
}

// Default returns the built-in settings. It has no downstream URL, so it
// validates only once one is set or Demo is true.
func Default() Config {
	return Config{
		NATS: NATS{Name: "meter-consumer", Listen: "127.0.0.1:4222", Embedded: true, ConnectRetryMax: 30 * time.Second},
		Stream: Stream{
			Name:       "METER_READS",
			Subjects:   []string{"meter.reads.>"},
			Replicas:   1,
			MaxAge:     7 * 24 * time.Hour,
			Duplicates: 10 * time.Minute,
		},
		Consumer: Consumer{
			Durable:        "meter-consumer",
			Concurrency:    32,
			AckWait:        30 * time.Second,
			MaxAckPending:  10000,
			HandlerTimeout: 6 * time.Second,
		},
		Retry: Retry{
			Base:          500 * time.Millisecond,
			Cap:           30 * time.Second,
			MaxAttempts:   6,
			MaxServerWait: 5 * time.Minute,

			BudgetPercent:      10,
			BudgetMinPerSecond: 5,
		},
		Breaker: Breaker{
			Enabled:        true,
			Window:         30 * time.Second,
			MinCalls:       20,
			FailurePercent: 50,
			CoolDown:       time.Second,
			MaxCoolDown:    2 * time.Second,
			Probes:         3,
		},
		DLQ: DLQ{
			Stream:     "METER_READS_DLQ",
			Prefix:     "meter.dlq",
			Duplicates: 20 * time.Minute,
			MaxBytes:   1 << 30,
		},
		Downstream: Downstream{
			Timeout:           5 * time.Second,
			PermanentStatuses: []int{400, 404, 405, 410, 413, 414, 415, 422},
			Adaptive:          true,
			ReloadInterval:    10 * time.Second,
		},
		HTTP:     HTTP{Addr: ":8080"},
		Log:      Log{Format: "auto", Level: "info"},
		Shutdown: Shutdown{Timeout: 30 * time.Second},
		DataDir:  "./data",
	}
}
