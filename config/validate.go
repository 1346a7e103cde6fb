package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/downstream"
)

// ErrInvalid is matched by every problem [Config.Validate] reports.
var ErrInvalid = errors.New("invalid configuration")

// fieldError is one problem found by Validate. Its text starts with the
// field's YAML path.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

func (e *fieldError) Is(target error) bool { return target == ErrInvalid }

// problems collects what Validate finds.
type problems []error

// addf adds a problem; a duration argument prints as formatDuration does.
func (p *problems) addf(format string, args ...any) {
	for i, a := range args {
		if d, ok := a.(time.Duration); ok {
			args[i] = formatDuration(d)
		}
	}
	*p = append(*p, &fieldError{msg: fmt.Sprintf(format, args...)})
}

const (
	nameRule    = `a valid JetStream name: non-empty, without spaces, '.', '*', '>', '/' or '\'`
	subjectRule = `a valid NATS subject: dot-separated non-empty tokens without spaces, '>' only as the last token`
)

var (
	logFormats  = []string{"auto", "text", "json"}
	logLevels   = []string{"debug", "info", "warn", "error"}
	natsSchemes = []string{"nats", "tls", "ws", "wss"}
)

// Validate returns nil if c is usable, or every problem joined with
// errors.Join. Each names the field's YAML path, its value (never a secret)
// and what would be valid, and matches [ErrInvalid]. It connects to nothing.
func (c Config) Validate() error { return c.validate(true) }

// validate checks c; the dead-letter tools do not call the downstream, so
// they pass needDownstream false.
func (c Config) validate(needDownstream bool) error {
	if !needDownstream && c.Downstream.URL == "" {
		c.Demo = true // the URL is not needed; every other rule holds
	}
	var p problems
	c.validateNATS(&p)
	c.validateStream(&p)
	c.validateConsumer(&p)
	c.validateRetry(&p)
	c.validateDLQ(&p)
	c.validateDownstream(&p)
	c.validateDownstreamAccess(&p, needDownstream)
	c.validateService(&p)
	return errors.Join(p...)
}

func (c Config) validateNATS(p *problems) {
	n := c.NATS
	if n.URL != "" {
		for u := range strings.SplitSeq(n.URL, ",") {
			if !validNATSURL(strings.TrimSpace(u)) {
				p.addf("nats.url (%q) must be a comma-separated list of nats://, tls://, ws:// or wss:// URLs with a host, or empty to start an embedded server",
					redactURLs(n.URL))
				break
			}
		}
	}
	if n.User != "" && n.Password == "" {
		p.addf("nats.user (%q) is set but nats.password is empty: set both or neither", n.User)
	}
	if n.Password != "" && n.User == "" {
		p.addf("nats.password is set but nats.user is empty: set both or neither")
	}
	if n.Token != "" && n.User != "" {
		p.addf("nats.token and nats.user (%q) are both set: authenticate with one of them", n.User)
	}
	// The files are read when the connection is made, and a missing one
	// would fail every attempt while the service kept trying: refused here,
	// as the rate engine's are.
	for _, f := range []struct{ key, path string }{
		{"nats.creds", n.Creds}, {"nats.nkey_seed", n.NKeySeed}, {"nats.tls.ca", n.TLS.CA}, {"nats.tls.cert", n.TLS.Cert}, {"nats.tls.key", n.TLS.Key},
	} {
		if f.path == "" {
			continue
		}
		if file, err := os.Open(f.path); err != nil {
			p.addf("%s (%q) cannot be read: %v", f.key, f.path, errors.Unwrap(err))
		} else {
			_ = file.Close()
		}
	}
	if n.TLS.Cert != "" && n.TLS.Key == "" {
		p.addf("nats.tls.cert (%q) is set but nats.tls.key is empty: a client certificate needs its key", n.TLS.Cert)
	}
	if n.TLS.Key != "" && n.TLS.Cert == "" {
		p.addf("nats.tls.key (%q) is set but nats.tls.cert is empty: a client key needs its certificate", n.TLS.Key)
	}
	if n.InboxPrefix != "" && !validPrefix(n.InboxPrefix) {
		p.addf("nats.inbox_prefix (%q) must be a subject prefix without wildcards: dot-separated non-empty tokens without spaces, '*' or '>'", n.InboxPrefix)
	}
	if n.ConnectRetryMax < time.Second {
		p.addf("nats.connect_retry_max (%s) must be >= 1s", n.ConnectRetryMax)
	}
	if n.URL == "" && !n.Embedded {
		p.addf(`nats.url ("") is required when nats.embedded is false: give the NATS servers' URLs (an embedded server is for a newcomer's machine and the demo only)`)
	}
	if n.URL == "" {
		if _, _, err := net.SplitHostPort(n.Listen); err != nil {
			p.addf("nats.listen (%q) must be host:port, e.g. 127.0.0.1:4222, when nats.url is empty", n.Listen)
		}
	}
	if n.URL == "" && c.DataDir == "" {
		p.addf(`data_dir ("") must be set when nats.url is empty: the embedded server stores its data there`)
	}
}

func validNATSURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && slices.Contains(natsSchemes, u.Scheme) && u.Host != "" && validPort(u)
}

// validPort reports a URL without a port, or with one from 1 to 65535.
func validPort(u *url.URL) bool {
	port := u.Port()
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

func (c Config) validateStream(p *problems) {
	s := c.Stream
	if !validName(s.Name) {
		p.addf("stream.name (%q) must be %s", s.Name, nameRule)
	}
	if len(s.Subjects) == 0 {
		p.addf("stream.subjects ([]) must list at least one subject")
	}
	for i, subj := range s.Subjects {
		if !validSubject(subj) {
			p.addf("stream.subjects[%d] (%q) must be %s", i, subj, subjectRule)
			continue
		}
		for j, other := range s.Subjects[:i] {
			if validSubject(other) && subjectsOverlap(subj, other) {
				p.addf("stream.subjects[%d] (%q) overlaps stream.subjects[%d] (%q): the server refuses a stream whose subjects overlap; keep the wider one", i, subj, j, other)
			}
		}
	}
	if s.MaxAge < 0 {
		p.addf("stream.max_age (%s) must be >= 0 (0: unlimited)", s.MaxAge)
	} else if s.MaxAge > 0 && s.MaxAge < time.Hour {
		p.addf("stream.max_age (%s) must be 0 (unlimited) or >= 1h: a read older than this is deleted, settled or not", s.MaxAge)
	}
	if s.MaxBytes < 0 {
		p.addf("stream.max_bytes (%d) must be >= 0 (0: unlimited)", s.MaxBytes)
	}
	switch {
	case s.Duplicates <= 0:
		p.addf("stream.duplicates (%s) must be > 0: give the window within which a read published again with the same Nats-Msg-Id is dropped, e.g. 10m", s.Duplicates)
	case s.MaxAge > 0 && s.Duplicates > s.MaxAge:
		p.addf("stream.duplicates (%s) must be <= stream.max_age (%s): the server refuses a longer window; shorten it or raise stream.max_age", s.Duplicates, s.MaxAge)
	}
	switch {
	case s.Replicas < 1 || s.Replicas > 5:
		p.addf("stream.replicas (%d) must be between 1 and 5", s.Replicas)
	case s.Replicas > 1 && c.NATS.URL == "":
		p.addf("stream.replicas (%d) must be 1 when nats.url is empty: the embedded server is a single node", s.Replicas)
	}
}

// minHandlerTimeout is the shortest handler timeout: the call gets all of it
// but what is kept to record and settle the read, at least 100ms and at
// most half, so no less than that.
const minHandlerTimeout = 200 * time.Millisecond

func (c Config) validateConsumer(p *problems) {
	k := c.Consumer
	if !validName(k.Durable) {
		p.addf("consumer.durable (%q) must be %s", k.Durable, nameRule)
	}
	if k.RecordsBucket != "" && !validBucket(k.RecordsBucket) {
		p.addf("consumer.records_bucket (%q) must be a key-value bucket name: letters, digits, '-' and '_' only", k.RecordsBucket)
	}
	switch {
	case k.Concurrency < 1:
		p.addf("consumer.concurrency (%d) must be >= 1", k.Concurrency)
	case k.Concurrency > 4096:
		p.addf("consumer.concurrency (%d) must be <= 4096", k.Concurrency)
	}
	if k.AckWait < time.Second {
		p.addf("consumer.ack_wait (%s) must be >= 1s", k.AckWait)
	}
	if k.MaxAckPending < k.Concurrency {
		p.addf("consumer.max_ack_pending (%d) must be >= consumer.concurrency (%d): every read in flight, one waiting out a retry delay included, holds an ack-pending slot, so fewer slots than workers leaves workers idle",
			k.MaxAckPending, k.Concurrency)
	}
	switch {
	case k.HandlerTimeout <= 0:
		p.addf("consumer.handler_timeout (%s) must be > 0", k.HandlerTimeout)
	case k.HandlerTimeout < minHandlerTimeout:
		p.addf("consumer.handler_timeout (%s) must be >= %s: at least 100ms of it is kept to record and settle the read, and the call gets no less; when it is not given it is derived (from consumer.ack_wait and consumer.pull_batch, or downstream.timeout): give a larger ack_wait, or a smaller pull_batch",
			k.HandlerTimeout, minHandlerTimeout)
	case k.HandlerTimeout >= k.AckWait:
		p.addf("consumer.handler_timeout (%s) must be < consumer.ack_wait (%s), so a handler gives up before the server redelivers (a setting not given is derived from the others: give fewer of them, or consistent ones)",
			k.HandlerTimeout, k.AckWait)
	}
	switch {
	case k.PullBatch < 0:
		p.addf("consumer.pull_batch (%d) must be >= 0 (0 chooses it from the concurrency)", k.PullBatch)
	case k.PullBatch > 0 && k.Concurrency > 0 && k.HandlerTimeout > 0 && k.HandlerTimeout < k.AckWait:
		// A pulled read may wait in the client buffer for every read ahead
		// of it: about pull_batch/concurrency handler timeouts.
		rounds := (k.PullBatch + k.Concurrency - 1) / k.Concurrency
		if wait := time.Duration(rounds) * k.HandlerTimeout; wait >= k.AckWait {
			p.addf("consumer.pull_batch (%d) / consumer.concurrency (%d) rounds of consumer.handler_timeout (%s) = %s must be < consumer.ack_wait (%s): a buffered read could be redelivered before a worker takes it; lower pull_batch or handler_timeout, or raise ack_wait",
				k.PullBatch, k.Concurrency, k.HandlerTimeout, wait, k.AckWait)
		}
	}
}

func (c Config) validateRetry(p *problems) {
	r := c.Retry
	if r.Base <= 0 {
		p.addf("retry.base (%s) must be > 0", r.Base)
	}
	if r.Cap < r.Base {
		p.addf("retry.cap (%s) must be >= retry.base (%s)", r.Cap, r.Base)
	}
	if r.MaxAttempts < 1 {
		p.addf("retry.max_attempts (%d) must be >= 1", r.MaxAttempts)
	}
	if r.BudgetPercent < 0 || r.BudgetPercent > 100 {
		p.addf("retry.budget_percent (%d) must be 0 (off) to 100", r.BudgetPercent)
	}
	if r.BudgetMinPerSecond < 0 {
		p.addf("retry.budget_min_per_second (%d) must be >= 0", r.BudgetMinPerSecond)
	}
	if r.MaxReadAge < 0 {
		p.addf("retry.max_read_age (%s) must be >= 0 (0: off)", r.MaxReadAge)
	}
	if r.MaxServerWait < 0 {
		p.addf("retry.max_server_wait (%s) must be >= 0 (0 ignores Retry-After)", r.MaxServerWait)
	}
}

func (c Config) validateDLQ(p *problems) {
	d := c.DLQ
	switch {
	case !validName(d.Stream):
		p.addf("dlq.stream (%q) must be %s", d.Stream, nameRule)
	case d.Stream == c.Stream.Name:
		p.addf("dlq.stream (%q) must differ from stream.name", d.Stream)
	}
	if !validPrefix(d.Prefix) {
		p.addf("dlq.prefix (%q) must be a subject prefix without wildcards: dot-separated non-empty tokens without spaces, '*' or '>'", d.Prefix)
	} else {
		dead := d.Prefix + ".>"
		for _, subj := range c.Stream.Subjects {
			if validSubject(subj) && subjectsOverlap(dead, subj) {
				p.addf("dlq.prefix (%q): dead-letter subjects %q overlap stream.subjects %q, so a dead-letter copy would be consumed again; choose a prefix outside the consumed subjects",
					d.Prefix, dead, subj)
			}
		}
	}
	if d.Duplicates < 10*time.Minute {
		p.addf("dlq.duplicates (%s) must be >= 10m", d.Duplicates)
	}
	if d.MaxBytes < 0 {
		p.addf("dlq.max_bytes (%d) must be >= 0 (0: unlimited)", d.MaxBytes)
	}
}

func (c Config) validateDownstream(p *problems) {
	d := c.Downstream
	switch {
	case d.URL == "" && !c.Demo:
		p.addf(`downstream.url ("") is required unless demo is set`)
	case d.URL != "" && !validHTTPURL(d.URL):
		p.addf("downstream.url (%q) must be an absolute http:// or https:// URL with a host", redactURL(d.URL))
	}
	switch {
	case c.DemoIncidents && !c.Demo:
		p.addf("demo_incidents (true) needs demo: the incidents are the simulated rate engine's")
	case c.DemoIncidents && d.URL != "":
		p.addf("demo_incidents (true) needs downstream.url empty (%q): the reads go there, not to the simulated rate engine the incidents happen to", redactURL(d.URL))
	}
	switch {
	case d.Timeout <= 0:
		p.addf("downstream.timeout (%s) must be > 0", d.Timeout)
	case c.Consumer.HandlerTimeout > 0 && d.Timeout >= c.Consumer.HandlerTimeout:
		p.addf("downstream.timeout (%s) must be < consumer.handler_timeout (%s)", d.Timeout, c.Consumer.HandlerTimeout)
	}
	for i, status := range d.PermanentStatuses {
		if status < 400 || status > 599 {
			p.addf("downstream.permanent_statuses[%d] (%d) must be between 400 and 599", i, status)
		}
	}
}

func validHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && validPort(u)
}

func (c Config) validateService(p *problems) {
	if c.HTTP.Addr != "" && !validAddr(c.HTTP.Addr) {
		p.addf(`http.addr (%q) must be host:port with a port from 0 to 65535, such as ":8080" or "127.0.0.1:8080", or empty to disable`, c.HTTP.Addr)
	}
	if a := c.HTTP.PprofAddr; a != "" {
		switch {
		case !validAddr(a):
			p.addf(`http.pprof_addr (%q) must be host:port with a port from 0 to 65535, such as "127.0.0.1:6060", or empty to disable`, a)
		case c.HTTP.Addr != "" && samePort(a, c.HTTP.Addr):
			p.addf(`http.pprof_addr (%q) must not share http.addr's port (%q): profiles are not served beside /metrics; pick another port, such as "127.0.0.1:6060"`, a, c.HTTP.Addr)
		}
	}
	if !slices.Contains(logFormats, c.Log.Format) {
		p.addf("log.format (%q) must be one of %s", c.Log.Format, strings.Join(logFormats, ", "))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		p.addf("log.level (%q) must be one of %s", c.Log.Level, strings.Join(logLevels, ", "))
	}
	if b := c.Breaker; b.Enabled {
		if b.Window <= 0 {
			p.addf("breaker.window (%s) must be > 0", b.Window)
		}
		if b.MinCalls < 1 {
			p.addf("breaker.min_calls (%d) must be >= 1", b.MinCalls)
		}
		if b.FailurePercent < 1 || b.FailurePercent > 100 {
			p.addf("breaker.failure_percent (%d) must be 1 to 100", b.FailurePercent)
		}
		if b.CoolDown <= 0 {
			p.addf("breaker.cool_down (%s) must be > 0", b.CoolDown)
		}
		if b.MaxCoolDown < b.CoolDown {
			p.addf("breaker.max_cool_down (%s) must be >= breaker.cool_down (%s)", b.MaxCoolDown, b.CoolDown)
		}
		if b.Probes < 1 {
			p.addf("breaker.probes (%d) must be >= 1", b.Probes)
		}
	}
	if c.Shutdown.Timeout <= 0 {
		p.addf("shutdown.timeout (%s) must be > 0", c.Shutdown.Timeout)
	}
}

// samePort reports whether two valid addresses name the same fixed port
// (port 0 picks a free one: never the same).
func samePort(a, b string) bool {
	_, pa, _ := net.SplitHostPort(a)
	_, pb, _ := net.SplitHostPort(b)
	return pa == pb && pa != "0"
}

func validAddr(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= 65535
}

// validateDownstreamAccess checks the token file, TLS files and headers of
// the downstream. The files are read, so that one that cannot be is
// reported here, by its field, with every other problem; the tools that do
// not post (needDownstream false) do not read them.
func (c Config) validateDownstreamAccess(p *problems, needDownstream bool) {
	d := c.Downstream
	if d.ReloadInterval <= 0 {
		p.addf("downstream.reload_interval (%s) must be > 0", d.ReloadInterval)
	}
	switch {
	case d.TLS.Cert != "" && d.TLS.Key == "":
		p.addf("downstream.tls.cert (%q) is set but downstream.tls.key is empty: a client certificate needs its key", d.TLS.Cert)
	case d.TLS.Key != "" && d.TLS.Cert == "":
		p.addf("downstream.tls.key (%q) is set but downstream.tls.cert is empty: a client key needs its certificate", d.TLS.Key)
	case d.TLS.Cert != "" && needDownstream:
		if _, err := downstream.LoadClientCert(d.TLS.Cert, d.TLS.Key); err != nil {
			p.addf("downstream.tls.cert (%q) and downstream.tls.key (%q): %v", d.TLS.Cert, d.TLS.Key, err)
		}
	}
	if d.TLS.CA != "" && needDownstream {
		if _, err := downstream.LoadCAFile(d.TLS.CA); err != nil {
			p.addf("downstream.tls.ca (%q): %v", d.TLS.CA, err)
		}
	}
	if d.TokenFile != "" && needDownstream {
		if _, err := downstream.ReadTokenFile(d.TokenFile); err != nil {
			p.addf("downstream.token_file (%q): %v", d.TokenFile, err)
		}
	}
	names := slices.Sorted(maps.Keys(d.Headers))
	for i, name := range names {
		if err := downstream.CheckHeader(name, d.Headers[name], d.TokenFile != ""); err != nil {
			p.addf("downstream.headers[%q]: %v", name, err)
		}
		for _, other := range names[:i] {
			if strings.EqualFold(name, other) {
				p.addf("downstream.headers[%q] and downstream.headers[%q] name the same header: give it once", other, name)
			}
		}
	}
}
