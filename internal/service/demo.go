package service

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/demo"
)

// startDemo starts the simulated rate engine on loopback, its incidents if
// cfg.DemoIncidents, and the simulated head-end publishing to the first
// consumed subject's prefix; the engine's phase gauge is registered on reg.
// It returns the rate engine's URL and a stop function that waits for them.
func startDemo(ctx context.Context, cfg config.Config, js jetstream.JetStream, reg prometheus.Registerer, log *slog.Logger) (string, func(), error) {
	seed := uint64(time.Now().UnixNano())
	re, err := demo.NewRateEngine(demo.RateEngineOptions{
		Rand:    rand.New(rand.NewPCG(seed, 1)),
		Metrics: demo.NewMetrics(reg),
		Logger:  log.With(slog.String("component", "demo-rate-engine")),
	})
	if err != nil {
		return "", nil, err
	}
	// The rate engine outlives the signal, so in-flight reads can finish;
	// the head-end stops publishing at the signal.
	reCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	heCtx, cancelHE := context.WithCancel(ctx)
	url, waitRE, err := demo.StartRateEngine(reCtx, re, "127.0.0.1:0")
	if err != nil {
		cancel()
		cancelHE()
		return "", nil, err
	}
	he := &demo.HeadEnd{
		Publisher:      js,
		Subject:        subjectPrefix(cfg.Stream.Subjects),
		Rate:           20,
		Meters:         500,
		InvalidPercent: 3,
		Rand:           rand.New(rand.NewPCG(seed, 2)),
		Now:            time.Now,
		Logger:         log.With(slog.String("component", "demo-head-end")),
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = he.Run(heCtx)
	}()
	// The incidents last as long as the engine.
	var incidents sync.WaitGroup
	if cfg.DemoIncidents {
		incidents.Go(func() { _ = (&demo.Incidents{Engine: re}).Run(reCtx) })
	}
	log.Info("demo: simulated head-end and rate engine running",
		slog.String("rate_engine", url), slog.String("publishing_to", he.Subject+".<region>"),
		slog.Bool("incidents", cfg.DemoIncidents))
	return url, func() {
		cancelHE()
		wg.Wait()
		cancel()
		incidents.Wait()
		_ = waitRE()
		valid, invalid := he.Published()
		s := re.Stats()
		log.Info("demo: stopped", slog.Int64("published_valid", valid), slog.Int64("published_invalid", invalid),
			slog.Int64("billed", s.Billed), slog.Int64("duplicates", s.Duplicates))
	}, nil
}

// subjectPrefix turns the first consumed subject into a publish prefix:
// "meter.reads.>" gives "meter.reads". Without one (or with only
// wildcards) it is the default subject's.
func subjectPrefix(subjects []string) string {
	def := config.Default().Stream.Subjects[0]
	s := def
	if len(subjects) > 0 {
		s = subjects[0]
	}
	if p := strings.TrimRight(s, ">*."); p != "" {
		return p
	}
	return strings.TrimRight(def, ">*.")
}
