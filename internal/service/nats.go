package service

import (
	"context"
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

// EmbeddedAddr is where the embedded server listens, so that a head-end
// simulator or the nats CLI can publish to it.
const EmbeddedAddr = "127.0.0.1:4222"

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
// passed to the client only, never logged.
func connectOptions(c config.NATS, log *slog.Logger) []nats.Option {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1), // reconnect forever
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, 2*time.Second),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: we closed it ourselves
				log.Warn("disconnected from NATS", slog.Any("error", err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", slog.String("server", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS async error", slog.Any("error", err))
		}),
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

// connect dials NATS, retrying with full jitter while the server is not
// reachable yet (a fleet that starts together does not dial together).
func connect(ctx context.Context, url string, opts []nats.Option, rnd retry.Source, log *slog.Logger) (*nats.Conn, error) {
	var nc *nats.Conn
	d := retry.Driver{
		Policy: retry.Policy{Base: 250 * time.Millisecond, Cap: 5 * time.Second, MaxAttempts: 12},
		Rand:   rnd,
		// Wrong credentials will not get better by waiting.
		Transient: func(err error) bool {
			return !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) &&
				!errors.Is(err, nats.ErrAuthRevoked) && !errors.Is(err, nats.ErrAccountAuthExpired)
		},
	}
	attempt := 0
	err := d.Do(ctx, func(context.Context) error {
		attempt++
		var err error
		nc, err = nats.Connect(url, opts...)
		if err != nil {
			log.Warn("connecting to NATS", slog.Int("attempt", attempt), slog.Any("error", err))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

// Connect dials the NATS server the configuration names; with no URL it
// dials the embedded server's address (a consumer running on this machine).
// Tools use it; the service itself calls connect.
func Connect(ctx context.Context, c config.NATS, log *slog.Logger) (*nats.Conn, error) {
	url := c.URL
	if url == "" {
		url = "nats://" + c.Listen
	}
	opts := append(connectOptions(c, log), nats.MaxReconnects(0))
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
