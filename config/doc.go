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
// unknown-key check, [Usage] and [Reference] (a Markdown table for the README)
// are all driven by it, so they cannot drift apart. Durations are Go
// durations ("500ms", "30s", "5m") in every layer; lists are comma-separated
// in environment variables and flags. An empty environment variable counts as
// unset.
//
// # Errors
//
//   - [Load] returns an error matching [flag.ErrHelp] for -h or --help; the
//     caller prints [Usage] and exits 0.
//   - A missing file, an unknown YAML key, or an environment variable or flag
//     that does not parse is reported with the file, key, variable or flag,
//     the value and what would be valid.
//   - [Config.Validate] reports every problem at once with errors.Join; each
//     names the field's YAML path, its value and what would be valid, and
//     matches [ErrInvalid].
//
// # Secrets
//
// nats.password and nats.token are secrets, as is a password inside a URL's
// user info. They never appear in an error, in [Usage] or [Reference], in
// [Config.Redacted], in fmt output of a Config or NATS value (every verb), or
// in a log record ([Config.LogValue]). Paths to credential files (nats.creds,
// nats.nkey_seed) are not secrets and are shown.
//
// Nothing in the package connects, and a Config is a plain value that is safe
// to copy and to read concurrently.
package config
