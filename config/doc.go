// Package config builds the one configuration of the consumer binary.
//
// A [Config] starts from [Default], then takes the YAML file named by --config
// (or CONSUMER_CONFIG), then environment variables, then command-line flags;
// each layer overrides the one before, and a flag counts only when it is
// given on the command line. [Load] does all of it and then calls
// [Config.Validate], so a bad setting is reported before anything connects.
//
// # Settings
//
// One table describes every setting: its flag, environment variable, YAML
// path, default and help. The flag set, the environment lookup, the YAML
// unknown-key check, [Usage] and [Reference] (the Markdown table of docs/CONFIGURATION.md)
// are all driven by it, so they cannot drift apart. Durations are Go
// durations ("500ms", "30s", "5m") in every layer; lists are comma-separated
// in environment variables and flags. An empty environment variable counts as
// unset.
//
// [Default] is the one place a default is written. The packages the binary
// is wired from (stream, breaker, budget, downstream, topology) have none of
// their own for what a setting gives them: they refuse the option missing,
// and service.PipelineOptions and service.Topology hand them this package's
// values. What is not a setting but still the binary's choice is here too:
// [RetryBudgetWindow], [RecordsTTL], [DLQ.PublishTimeout] and
// [DLQ.PublishRetry].
//
// # Why not knadh/koanf
//
// The layering is this package's own, on gopkg.in/yaml.v3's nodes, because
// what a user is told about a mistake is the point of it: the file is
// parsed once into nodes, so an unknown key is reported with its full path,
// its line and the keys valid beside it (TestLoadErrors), merged (<<) keys
// included (TestMergeKeysAreReadAsTheirKeys), and the settings the file
// gives are known, so a derived default never overrides one. knadh/koanf
// v2 reads a file into a map before it decodes it: the lines are gone
// before any key is checked.
//
// # Errors
//
//   - [Load] returns an error matching [flag.ErrHelp] for -h or --help; the
//     caller prints [Usage] and exits 0.
//   - A missing file, an unknown YAML key, or an environment variable or flag
//     that does not parse is reported with the file, key, variable or flag,
//     the value and what would be valid; the file's, the environment's and
//     the validation's problems together (a flag that does not parse stops
//     the parse: it alone).
//   - [Config.Validate] reports every problem at once with errors.Join; each
//     names the field's YAML path, its value and what would be valid, and
//     matches [ErrInvalid].
//   - [LogOf] never fails: it reads the log section of a configuration Load
//     refused as far as it can, so that the refusal is written in the format
//     the process's lines would have had.
//
// # Secrets
//
// nats.password and nats.token are secrets, as is a password inside a URL's
// user info. They never appear in an error, in [Usage] or [Reference], in
// [Config.Redacted], in fmt output of a Config or NATS value (every verb), or
// in a log record ([Config.LogValue]), or in the YAML [Config.WriteYAML]
// writes ("consumer config": the effective configuration, read back by Load
// into the same, redacted, Config). Paths to credential files (nats.creds,
// nats.nkey_seed, downstream.token_file, downstream.tls.key) are not secrets
// and are shown; the downstream's bearer token is only ever in its file. The
// value of a downstream header whose name looks like a credential (it holds
// auth, token, key, secret, password, session, cookie, signature or
// credential) is redacted in the same places; a header value is never put in
// an error.
//
// # Downstream headers
//
// downstream.headers is a mapping in YAML, "Name: value" lines in
// CONSUMER_DOWNSTREAM_HEADERS, and one "Name: value" per --downstream-headers
// flag, which can be repeated; a value may hold commas. As every setting, a
// layer replaces the headers of the layer before, it does not add to them.
//
// [Downstream.Access] turns the token file, TLS files and headers into what
// the HTTP sink takes. Validate reads those files, so that one that cannot be
// read is reported by its field before anything starts.
//
// Nothing in the package connects, and a Config is a plain value that is safe
// to copy and to read concurrently.
package config
