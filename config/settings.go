package config

// setting is one row of the table that drives flags, environment variables,
// the YAML key check, Usage and Reference.
type setting struct {
	flag   string            // without dashes; "" when there is no flag
	env    string            // "" when there is no environment variable
	yaml   string            // dotted YAML path; "" for --config itself
	help   string            // one line
	secret bool              // never shown: no flag, no default, no value in errors
	field  func(*Config) any // pointer to the field; nil for --config itself
}

// configFlag and configEnv name the file to read: the one setting that is
// not a field of Config.
const configFlag, configEnv = "config", "CONSUMER_CONFIG"

// settings lists every setting in the order Usage, Reference and log records
// show them. TestSettingsCoverConfig checks that it names every field once.
var settings = []setting{
	{flag: configFlag, env: configEnv, help: "YAML file to read settings from"},

	{flag: "nats-url", env: "NATS_URL", yaml: "nats.url", help: `NATS server URLs, comma-separated (nats://, tls://, ws://, wss://); "" starts an embedded server`, field: func(c *Config) any { return &c.NATS.URL }},
	{flag: "nats-creds", env: "NATS_CREDS", yaml: "nats.creds", help: "path to a NATS .creds file", field: func(c *Config) any { return &c.NATS.Creds }},
	{flag: "nats-user", env: "NATS_USER", yaml: "nats.user", help: "NATS user; needs nats.password", field: func(c *Config) any { return &c.NATS.User }},
	{env: "NATS_PASSWORD", yaml: "nats.password", help: "NATS password; a secret, so there is no flag", secret: true, field: func(c *Config) any { return &c.NATS.Password }},
	{env: "NATS_TOKEN", yaml: "nats.token", help: "NATS token, instead of a user; a secret, so there is no flag", secret: true, field: func(c *Config) any { return &c.NATS.Token }},
	{flag: "nats-nkey", env: "NATS_NKEY", yaml: "nats.nkey_seed", help: "path to an nkey seed file", field: func(c *Config) any { return &c.NATS.NKeySeed }},
	{flag: "nats-ca", env: "NATS_CA", yaml: "nats.tls.ca", help: "path to the CA certificate(s) that sign the NATS server's certificate", field: func(c *Config) any { return &c.NATS.TLS.CA }},
	{flag: "nats-cert", env: "NATS_CERT", yaml: "nats.tls.cert", help: "path to the client certificate; needs nats.tls.key", field: func(c *Config) any { return &c.NATS.TLS.Cert }},
	{flag: "nats-key", env: "NATS_KEY", yaml: "nats.tls.key", help: "path to the client certificate's private key", field: func(c *Config) any { return &c.NATS.TLS.Key }},
	{flag: "nats-inbox-prefix", env: "CONSUMER_NATS_INBOX_PREFIX", yaml: "nats.inbox_prefix", help: `prefix of the subjects replies come on, e.g. _INBOX_meter_consumer, so its NATS user may subscribe to its own replies only; "" = _INBOX`, field: func(c *Config) any { return &c.NATS.InboxPrefix }},
	{flag: "nats-listen", env: "CONSUMER_NATS_LISTEN", yaml: "nats.listen", help: "host:port of the embedded server; used when nats.url is empty", field: func(c *Config) any { return &c.NATS.Listen }},
	{flag: "nats-embedded", env: "CONSUMER_NATS_EMBEDDED", yaml: "nats.embedded", help: "start an embedded server when nats.url is empty (a newcomer's machine, the demo); false refuses to start without nats.url, as a production deployment should", field: func(c *Config) any { return &c.NATS.Embedded }},
	{flag: "nats-connect-retry-max", env: "CONSUMER_NATS_CONNECT_RETRY_MAX", yaml: "nats.connect_retry_max", help: "longest wait between two attempts to connect to NATS, or to find the streams, at start (a full-jittered delay doubling from 250ms); the service keeps trying, /readyz saying why, until it consumes or is stopped; >= 1s", field: func(c *Config) any { return &c.NATS.ConnectRetryMax }},
	{flag: "nats-name", env: "CONSUMER_NATS_NAME", yaml: "nats.name", help: "connection name shown by the NATS server", field: func(c *Config) any { return &c.NATS.Name }},

	{flag: "stream", env: "CONSUMER_STREAM", yaml: "stream.name", help: "JetStream stream holding the meter reads", field: func(c *Config) any { return &c.Stream.Name }},
	{flag: "subjects", env: "CONSUMER_SUBJECTS", yaml: "stream.subjects", help: "subjects to consume, comma-separated", field: func(c *Config) any { return &c.Stream.Subjects }},
	{flag: "create-streams", env: "CONSUMER_CREATE_STREAMS", yaml: "stream.create", help: "create the stream and the dead-letter stream if they are missing", field: func(c *Config) any { return &c.Stream.Create }},
	{flag: "replicas", env: "CONSUMER_REPLICAS", yaml: "stream.replicas", help: "replicas of the created streams, records bucket and durable, 1 to 5; when not set: 3 with nats.url, 1 on the embedded server (1 on a real server only when given)", field: func(c *Config) any { return &c.Stream.Replicas }},
	{flag: "stream-max-age", env: "CONSUMER_STREAM_MAX_AGE", yaml: "stream.max_age", help: "max age of a created stream: a read older than this is deleted, settled or not (alerted on at half of it); 0 = unlimited, else >= 1h", field: func(c *Config) any { return &c.Stream.MaxAge }},
	{flag: "stream-max-bytes", env: "CONSUMER_STREAM_MAX_BYTES", yaml: "stream.max_bytes", help: "max bytes of a created stream; when full it refuses new reads (discard new), never drops old ones; 0 = unlimited", field: func(c *Config) any { return &c.Stream.MaxBytes }},
	{flag: "stream-duplicates", env: "CONSUMER_STREAM_DUPLICATES", yaml: "stream.duplicates", help: "duplicate window of a created stream: a read published again with the same Nats-Msg-Id within it is dropped (a head-end's retry, a dead-letter replay run again); > 0 and <= stream.max_age", field: func(c *Config) any { return &c.Stream.Duplicates }},
	{flag: "reconcile", env: "CONSUMER_RECONCILE", yaml: "stream.reconcile", help: "update existing streams and the durable to these settings; without it a durable the service cannot run on stops start-up, and stream differences are only logged", field: func(c *Config) any { return &c.Stream.Reconcile }},

	{flag: "durable", env: "CONSUMER_DURABLE", yaml: "consumer.durable", help: "durable consumer name", field: func(c *Config) any { return &c.Consumer.Durable }},
	{flag: "concurrency", env: "CONSUMER_CONCURRENCY", yaml: "consumer.concurrency", help: "reads handled at once, 1 to 4096", field: func(c *Config) any { return &c.Consumer.Concurrency }},
	{flag: "ack-wait", env: "CONSUMER_ACK_WAIT", yaml: "consumer.ack_wait", help: "how long the server waits for an ack before redelivering; >= 1s; when not set: max(30s, 2 x handler_timeout)", field: func(c *Config) any { return &c.Consumer.AckWait }},
	{flag: "max-ack-pending", env: "CONSUMER_MAX_ACK_PENDING", yaml: "consumer.max_ack_pending", help: "reads delivered but not yet acked, those waiting out a retry included; >= concurrency", field: func(c *Config) any { return &c.Consumer.MaxAckPending }},
	{flag: "pull-batch", env: "CONSUMER_PULL_BATCH", yaml: "consumer.pull_batch", help: "messages one pull asks for (the client buffer); 0 = 4 x concurrency, less if needed so that ceil(pull_batch/concurrency) x handler_timeout < ack_wait (a buffered read waits at most that long)", field: func(c *Config) any { return &c.Consumer.PullBatch }},
	{flag: "handler-timeout", env: "CONSUMER_HANDLER_TIMEOUT", yaml: "consumer.handler_timeout", help: "time allowed to handle one delivery, the dead-letter copy included; >= 200ms, < ack wait; a call gets all of it but a sixth (at least 100ms, at most half), kept to record and settle the read; when not set: min(6s, 4/5 ack_wait), raised to downstream.timeout + max(1/5 of it, 100ms) when that is set", field: func(c *Config) any { return &c.Consumer.HandlerTimeout }},
	{flag: "records-bucket", env: "CONSUMER_RECORDS_BUCKET", yaml: "consumer.records_bucket", help: `key-value bucket of each read's hand-backs and dead-letter decision; "" = <stream>_<durable>_records`, field: func(c *Config) any { return &c.Consumer.RecordsBucket }},

	{flag: "retry-base", env: "CONSUMER_RETRY_BASE", yaml: "retry.base", help: "ceiling of the first retry delay", field: func(c *Config) any { return &c.Retry.Base }},
	{flag: "retry-cap", env: "CONSUMER_RETRY_CAP", yaml: "retry.cap", help: "largest ceiling of any retry delay; >= retry base", field: func(c *Config) any { return &c.Retry.Cap }},
	{flag: "max-attempts", env: "CONSUMER_MAX_ATTEMPTS", yaml: "retry.max_attempts", help: "calls to the rate engine in all, the first included, before a read is dead-lettered (a delivery that reached no call is not one)", field: func(c *Config) any { return &c.Retry.MaxAttempts }},
	{flag: "retry-budget-percent", env: "CONSUMER_RETRY_BUDGET_PERCENT", yaml: "retry.budget_percent", help: "retries may add at most this percentage of the first attempts over 10s; a retry over it is held, kept alive, not charged; 0 to 100, 0 turns the budget off", field: func(c *Config) any { return &c.Retry.BudgetPercent }},
	{flag: "retry-budget-min-per-second", env: "CONSUMER_RETRY_BUDGET_MIN_PER_SECOND", yaml: "retry.budget_min_per_second", help: "retries a second a replica may always make, however few its first attempts", field: func(c *Config) any { return &c.Retry.BudgetMinPerSecond }},
	{flag: "max-read-age", env: "CONSUMER_MAX_READ_AGE", yaml: "retry.max_read_age", help: "the age limit: a read older than this (from its stream timestamp) that fails transiently is dead-lettered with reason expired, not retried; 0 = off", field: func(c *Config) any { return &c.Retry.MaxReadAge }},
	{flag: "max-server-wait", env: "CONSUMER_MAX_SERVER_WAIT", yaml: "retry.max_server_wait", help: "longest Retry-After honoured; 0 ignores Retry-After", field: func(c *Config) any { return &c.Retry.MaxServerWait }},

	{flag: "breaker", env: "CONSUMER_BREAKER", yaml: "breaker.enabled", help: "stop pulling and hold reads while the downstream fails as a whole", field: func(c *Config) any { return &c.Breaker.Enabled }},
	{flag: "breaker-window", env: "CONSUMER_BREAKER_WINDOW", yaml: "breaker.window", help: "sliding window of downstream outcomes", field: func(c *Config) any { return &c.Breaker.Window }},
	{flag: "breaker-min-calls", env: "CONSUMER_BREAKER_MIN_CALLS", yaml: "breaker.min_calls", help: "calls in the window before the breaker may open", field: func(c *Config) any { return &c.Breaker.MinCalls }},
	{flag: "breaker-failure-percent", env: "CONSUMER_BREAKER_FAILURE_PERCENT", yaml: "breaker.failure_percent", help: "percentage of transient failures in the window that opens the breaker, 1 to 100, once the downstream has answered none of the replica's calls for a while", field: func(c *Config) any { return &c.Breaker.FailurePercent }},
	{flag: "breaker-cool-down", env: "CONSUMER_BREAKER_COOL_DOWN", yaml: "breaker.cool_down", help: "mean wait before probing the downstream, jittered ±50%", field: func(c *Config) any { return &c.Breaker.CoolDown }},
	{flag: "breaker-max-cool-down", env: "CONSUMER_BREAKER_MAX_COOL_DOWN", yaml: "breaker.max_cool_down", help: "bound of a cool-down that doubles while probes fail", field: func(c *Config) any { return &c.Breaker.MaxCoolDown }},
	{flag: "breaker-probes", env: "CONSUMER_BREAKER_PROBES", yaml: "breaker.probes", help: "calls let through when half-open; all must succeed to close", field: func(c *Config) any { return &c.Breaker.Probes }},

	{flag: "dlq-stream", env: "CONSUMER_DLQ_STREAM", yaml: "dlq.stream", help: "JetStream stream holding dead-letter copies", field: func(c *Config) any { return &c.DLQ.Stream }},
	{flag: "dlq-prefix", env: "CONSUMER_DLQ_PREFIX", yaml: "dlq.prefix", help: "dead-letter copies go to <prefix>.<original subject>; must not overlap the consumed subjects", field: func(c *Config) any { return &c.DLQ.Prefix }},
	{flag: "dlq-duplicates", env: "CONSUMER_DLQ_DUPLICATES", yaml: "dlq.duplicates", help: "duplicate window of a created dead-letter stream; >= 10m (past it a copy is looked for before it is made again)", field: func(c *Config) any { return &c.DLQ.Duplicates }},
	{flag: "dlq-max-bytes", env: "CONSUMER_DLQ_MAX_BYTES", yaml: "dlq.max_bytes", help: "max bytes of a created dead-letter stream (no max age: a copy waits for a person); when full new copies are refused and their reads stay unsettled; 0 = unlimited", field: func(c *Config) any { return &c.DLQ.MaxBytes }},

	{flag: "downstream-url", env: "CONSUMER_DOWNSTREAM_URL", yaml: "downstream.url", help: "http(s) URL the reads are posted to; required unless demo", field: func(c *Config) any { return &c.Downstream.URL }},
	{flag: "downstream-timeout", env: "CONSUMER_DOWNSTREAM_TIMEOUT", yaml: "downstream.timeout", help: "timeout of one downstream request; < handler timeout, and a call is cut at 5/6 of the handler timeout (at least 100ms short of it) whatever this says; when not set: min(5s, 5/6 handler_timeout)", field: func(c *Config) any { return &c.Downstream.Timeout }},
	{flag: "adaptive", env: "CONSUMER_ADAPTIVE", yaml: "downstream.adaptive", help: "adapt the calls in flight to the rate engine's capacity (AIMD from 1, lowered by sheds, timeouts and a rising latency), up to consumer.concurrency; false keeps consumer.concurrency", field: func(c *Config) any { return &c.Downstream.Adaptive }},
	{flag: "permanent-statuses", env: "CONSUMER_PERMANENT_STATUSES", yaml: "downstream.permanent_statuses", help: "downstream HTTP statuses that are never retried, comma-separated, 400 to 599", field: func(c *Config) any { return &c.Downstream.PermanentStatuses }},
	{flag: "downstream-token-file", env: "CONSUMER_DOWNSTREAM_TOKEN_FILE", yaml: "downstream.token_file", help: "path to a file holding the bearer token sent as Authorization; read again when it changes (a mounted secret)", field: func(c *Config) any { return &c.Downstream.TokenFile }},
	{flag: "downstream-reload-interval", env: "CONSUMER_DOWNSTREAM_RELOAD_INTERVAL", yaml: "downstream.reload_interval", help: "how often, at most, the token file and the client certificate are checked for a change; the token file also at once after a 401", field: func(c *Config) any { return &c.Downstream.ReloadInterval }},
	{flag: "downstream-ca", env: "CONSUMER_DOWNSTREAM_CA", yaml: "downstream.tls.ca", help: "path to the CA certificate(s) that sign the downstream's certificate, instead of the system's", field: func(c *Config) any { return &c.Downstream.TLS.CA }},
	{flag: "downstream-cert", env: "CONSUMER_DOWNSTREAM_CERT", yaml: "downstream.tls.cert", help: "path to the client certificate for mutual TLS; needs downstream.tls.key; read again when it changes", field: func(c *Config) any { return &c.Downstream.TLS.Cert }},
	{flag: "downstream-key", env: "CONSUMER_DOWNSTREAM_KEY", yaml: "downstream.tls.key", help: "path to the client certificate's private key", field: func(c *Config) any { return &c.Downstream.TLS.Key }},
	{flag: "downstream-headers", env: "CONSUMER_DOWNSTREAM_HEADERS", yaml: "downstream.headers", help: `extra headers on every request, "Name: value": repeat the flag, one a line in the environment, a mapping in YAML; not for secrets (values of names with key, token, auth, secret... are hidden in logs)`, field: func(c *Config) any { return &c.Downstream.Headers }},

	{flag: "http-addr", env: "CONSUMER_HTTP_ADDR", yaml: "http.addr", help: `host:port of the health and metrics server; "" disables it`, field: func(c *Config) any { return &c.HTTP.Addr }},
	{flag: "pprof-addr", env: "CONSUMER_PPROF_ADDR", yaml: "http.pprof_addr", help: `host:port of a profiling server (net/http/pprof) for diagnostics, such as "127.0.0.1:6060"; "" (the default) disables it; never the port of http.addr`, field: func(c *Config) any { return &c.HTTP.PprofAddr }},
	{flag: "log-format", env: "CONSUMER_LOG_FORMAT", yaml: "log.format", help: "log format: auto, text or json", field: func(c *Config) any { return &c.Log.Format }},
	{flag: "log-level", env: "CONSUMER_LOG_LEVEL", yaml: "log.level", help: "debug, info, warn or error", field: func(c *Config) any { return &c.Log.Level }},
	{flag: "shutdown-timeout", env: "CONSUMER_SHUTDOWN_TIMEOUT", yaml: "shutdown.timeout", help: "time allowed for in-flight reads to finish on stop", field: func(c *Config) any { return &c.Shutdown.Timeout }},
	{flag: "data-dir", env: "CONSUMER_DATA_DIR", yaml: "data_dir", help: "directory of the embedded server's store; used when nats.url is empty", field: func(c *Config) any { return &c.DataDir }},
	{flag: "demo", env: "CONSUMER_DEMO", yaml: "demo", help: "demo mode; downstream.url is not required", field: func(c *Config) any { return &c.Demo }},
	{flag: "demo-incidents", env: "CONSUMER_DEMO_INCIDENTS", yaml: "demo_incidents", help: "in demo mode, the simulated rate engine goes through incidents, repeated: 60s normal, 30s overloaded (1 server of 100ms, a queue of 4: 10 reads/s, half the head-end's rate), 60s normal, 20s down (503 to every call); needs demo and no downstream.url", field: func(c *Config) any { return &c.DemoIncidents }},
}
