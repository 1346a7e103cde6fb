package service

import (
	"log/slog"

	"github.com/meterline/meter-consumer/config"
)

// logStart writes the start-up line a person reads in a terminal: the
// version, where NATS is, the stream, the durable, the rate engine and
// whether the NATS server is embedded, secrets redacted. The whole
// configuration, redacted, follows at debug ("consumer config" prints it
// too).
func logStart(log *slog.Logger, cfg config.Config, version string) {
	r := cfg.Redacted()
	embedded := cfg.NATS.URL == ""
	nats := r.NATS.URL
	if embedded {
		nats = "embedded, listening on " + cfg.NATS.Listen
	}
	engine := r.Downstream.URL
	if engine == "" && cfg.Demo {
		engine = "the demo's simulated rate engine"
	}
	log.Info("starting meter-consumer", slog.String("version", version), slog.String("nats", nats),
		slog.String("stream", cfg.Stream.Name), slog.String("durable", cfg.Consumer.Durable),
		slog.String("engine", engine), slog.Bool("embedded_nats", embedded))
	log.Debug("configuration", slog.Any("config", cfg))
}
