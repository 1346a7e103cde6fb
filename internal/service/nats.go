package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/retry"
)

// startEmbedded starts a JetStream server storing under dir.
func startEmbedded(addr, dir string, log *slog.Logger) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded server address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("embedded server port %q: %w", portText, err)
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "meter-consumer-embedded",
		Host:       host, Port: port,
		JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded server on %s: not ready after 10s (is the port in use?)", addr)
	}
	log.Info("running an embedded NATS server with JetStream", slog.String("url", s.ClientURL()), slog.String("store", dir))
	return s, nil
}

// connectOptions turns the nats section into client options. Secrets are
// passed to the client only, never logged. event, when not nil, is told of
// each disconnection and reconnection (EventDisconnected, EventReconnected).
func connectOptions(c config.NATS, log *slog.Logger, event func(string)) []nats.Option {
	if event == nil {
		event = func(string) {}
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1), // reconnect forever
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, 2*time.Second),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: we closed it ourselves
				event(EventDisconnected)
				log.Warn("disconnected from NATS", slog.Any("error", err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			event(EventReconnected)
			log.Info("reconnected to NATS", slog.String("server", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS async error", slog.Any("error", err))
		}),
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKeySeed != "" {
		if o, err := nats.NkeyOptionFromSeed(c.NKeySeed); err == nil {
			opts = append(opts, o)
		} else {
			opts = append(opts, func(*nats.Options) error { return fmt.Errorf("nkey seed %s: %w", c.NKeySeed, err) })
		}
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CA))
	}
	if c.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
	}
	return opts
}

// ConnectRetryBase is the first delay between two attempts to connect at
// start; the delay doubles, jittered, up to nats.connect_retry_max.
const ConnectRetryBase = 250 * time.Millisecond

// errRefused marks a connection the server refused: wrong credentials, an
// expired or revoked account, a certificate it does not trust. Not a blip.
var errRefused = errors.New("NATS refused the connection")

// dial connects to NATS at start, retrying until it connects or ctx ends
// (nil, ctx.Err()): a NATS outage at boot keeps the service waiting, ready
// to consume the moment NATS answers, instead of exiting into a crash loop.
// The delay grows from ConnectRetryBase to max, full-jittered, so a fleet
// that starts together does not dial together. A refusal (errRefused) is
// not a blip: it is logged as an error each time, by name, set as the
// readiness reason, and retried at max (a rotated credentials file or a
// fixed account may let it in).
func dial(ctx context.Context, url string, opts []nats.Option, maxWait time.Duration, rnd retry.Source, log *slog.Logger, ready *readiness) (*nats.Conn, error) {
	var nc *nats.Conn
	d := startDriver(maxWait, rnd)
	d.RetryAfter = func(err error) time.Duration {
		if errors.Is(err, errRefused) {
			return d.Policy.Cap
		}
		return 0
	}
	d.Notify = func(attempt int, err error, wait time.Duration) {
		why, level := WhyConnecting, slog.LevelWarn
		if errors.Is(err, errRefused) {
			why, level = WhyRefused, slog.LevelError
		}
		log.Log(ctx, level, "connecting to NATS", slog.Int("attempt", attempt), slog.Any("error", err), slog.Duration("retry_in", wait))
		ready.set(why, fmt.Sprintf("connecting to NATS at %s: attempt %d: %v", redactedURL(url), attempt, err))
	}
	err := d.Do(ctx, func(context.Context) error {
		var err error
		nc, err = nats.Connect(url, opts...)
		if err != nil && refused(err) {
			return fmt.Errorf("%w: %w (check nats.user and NATS_PASSWORD, NATS_TOKEN, nats.creds, nats.nkey_seed, nats.tls.*)", errRefused, err)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return nc, nil
}

// startDriver is the retry loop of the start-up steps that wait for NATS:
// every error is retried until ctx ends, the delay growing from
// ConnectRetryBase to maxWait, full-jittered.
func startDriver(maxWait time.Duration, rnd retry.Source) retry.Driver {
	capped := max(maxWait, ConnectRetryBase)
	return retry.Driver{
		Policy: retry.Policy{Base: ConnectRetryBase, Cap: capped, MaxAttempts: retry.Forever, MaxServerWait: capped},
		Rand:   rnd,
	}
}

// refused reports a connection the server answered and refused.
func refused(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certErr *tls.CertificateVerificationError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &certErr)
}

// Dial connects to the NATS server the configuration names, once, for the
// dead-letter tools; with no URL it dials the embedded server's address (a
// consumer running on this machine).
// extra options come last (an ErrorHandler of the caller's, say).
func Dial(ctx context.Context, c config.NATS, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	url := c.URL
	if url == "" {
		url = "nats://" + c.Listen
	}
	opts := append(append(connectOptions(c, log, nil), nats.MaxReconnects(0)), extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactedURL(url), err)
	}
	return nc, nil
}

// redactedURL hides a password or token in a NATS URL.
func redactedURL(u string) string {
	return config.NATS{URL: u}.Redacted().URL
}
