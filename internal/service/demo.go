package service

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/demo"
	"github.com/meterline/meter-consumer/internal/retry"
)

// startDemo starts the simulated rate engine on loopback, its incidents if
// cfg.DemoIncidents, and the simulated head-end publishing to the first
// consumed subject's prefix; the engine's phase gauge is registered on reg.
// It returns the rate engine's URL and a stop function that waits for them.
// The simulators' randomness is seeded from rnd, the service's one source.
func startDemo(ctx context.Context, cfg config.Config, js jetstream.JetStream, reg prometheus.Registerer, rnd retry.Source, log *slog.Logger) (string, func(), error) {
	subject, err := subjectPrefix(cfg.Stream.Subjects)
	if err != nil {
		return "", nil, err
	}
	seed := uint64(rnd.Int64N(math.MaxInt64))
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
		Subject:        subject,
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

// subjectPrefix turns the first consumed subject into the prefix the
// simulated head-end publishes under (it adds a region token): "meter.reads.>"
// gives "meter.reads". A subject that leaves no prefix without wildcards
// ("*", "*.*", "meter.*.reads") is refused: the head-end would publish
// where the consumer does not read.
func subjectPrefix(subjects []string) (string, error) {
	if len(subjects) == 0 {
		return "", fmt.Errorf("demo: stream.subjects is empty: the simulated head-end needs a subject to publish under")
	}
	p := strings.TrimRight(subjects[0], ">*.")
	if p == "" || slices.ContainsFunc(strings.Split(p, "."), func(t string) bool { return t == "*" || t == ">" }) {
		return "", fmt.Errorf("demo: stream.subjects[0] (%q) leaves no prefix without wildcards for the simulated head-end to publish under: start it with literal tokens, e.g. meter.reads.>", subjects[0])
	}
	return p, nil
}
