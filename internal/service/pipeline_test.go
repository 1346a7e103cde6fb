package service_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/stream"
	"github.com/meterline/meter-consumer/internal/topology"
)

// The binary's effective defaults are config.Default()'s: what the wiring
// hands the pipeline's packages carries config's values, field by field.
func TestTheWiringCarriesConfigsDefaults(t *testing.T) {
	cfg := config.Default()
	o := service.PipelineOptions(cfg)
	assert.Equal(t, cfg.Retry.Policy(), o.Policy)
	assert.Equal(t, cfg.Retry.MaxReadAge, o.MaxReadAge)
	assert.Equal(t, cfg.Consumer.Concurrency, o.Concurrency)
	assert.Equal(t, cfg.Consumer.PullBatch, o.PullBatch)
	assert.Equal(t, cfg.Consumer.HandlerTimeout, o.HandlerTimeout)
	assert.Equal(t, cfg.Consumer.AckWait, o.AckWait)
	assert.Equal(t, cfg.Shutdown.Timeout, o.ShutdownTimeout)
	assert.Equal(t, cfg.DLQ.PublishRetry(), o.DeadLetterRetry)
	require.NotNil(t, o.Breaker, "breaker.enabled is true by default")
	b := cfg.Breaker
	assert.Equal(t, breaker.Options{Window: b.Window, MinCalls: b.MinCalls, FailureRatio: float64(b.FailurePercent) / 100,
		CoolDown: b.CoolDown, MaxCoolDown: b.MaxCoolDown, Probes: b.Probes}, *o.Breaker)

	assert.Equal(t, cfg.DLQ.Duplicates, service.Topology(cfg).DLQStreamConfig().Duplicates)
	lim, budg, err := service.Controls(cfg)
	require.NoError(t, err)
	assert.NotNil(t, lim, "downstream.adaptive is true by default")
	require.NotNil(t, budg, "retry.budget_percent is 10 by default")
	assert.Equal(t, config.RetryBudgetWindow, budg.Window())
}

// No package of the pipeline fills in a setting config gives it: each
// refuses the option missing instead, so that config.Default() is the one
// place a default is written. A package that grew its own default again
// would accept the zero value and fail its row here.
func TestNoPackageDefaultsWhatConfigGives(t *testing.T) {
	cfg := config.Default()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	pipeline := func(change func(*stream.Options)) error {
		o := service.PipelineOptions(cfg)
		o.Sink = downstream.Discard{}
		o.DeadLetter = dlq.NewPublisher(js, dlq.PublisherOptions{Prefix: cfg.DLQ.Prefix, Stream: cfg.DLQ.Stream})
		o.Metrics = stream.NewMetrics(prometheus.NewRegistry())
		o.Rand = retry.NewRand(1)
		change(&o)
		_, err := stream.New(o)
		return err
	}
	brk := func(change func(*breaker.Options)) error {
		o := *service.BreakerOptions(cfg.Breaker)
		change(&o)
		b, err := breaker.New(o)
		if err == nil {
			b.Stop()
		}
		return err
	}
	bud := func(change func(*budget.Options)) error {
		o := budget.Options{Ratio: float64(cfg.Retry.BudgetPercent) / 100, MinPerSecond: float64(cfg.Retry.BudgetMinPerSecond),
			Window: config.RetryBudgetWindow}
		change(&o)
		_, err := budget.New(o)
		return err
	}
	require.NoError(t, pipeline(func(*stream.Options) {}))
	require.NoError(t, brk(func(*breaker.Options) {}))
	require.NoError(t, bud(func(*budget.Options) {}))
	tests := []struct {
		option string
		build  func() error
	}{
		{"stream.Options.Policy", func() error { return pipeline(func(o *stream.Options) { o.Policy = retry.Policy{} }) }},
		{"stream.Options.Concurrency", func() error { return pipeline(func(o *stream.Options) { o.Concurrency = 0 }) }},
		{"stream.Options.HandlerTimeout", func() error { return pipeline(func(o *stream.Options) { o.HandlerTimeout = 0 }) }},
		{"stream.Options.AckWait", func() error { return pipeline(func(o *stream.Options) { o.AckWait = 0 }) }},
		{"stream.Options.ShutdownTimeout", func() error { return pipeline(func(o *stream.Options) { o.ShutdownTimeout = 0 }) }},
		{"stream.Options.DeadLetterRetry", func() error { return pipeline(func(o *stream.Options) { o.DeadLetterRetry = retry.Policy{} }) }},
		{"stream.Options.Breaker", func() error { return pipeline(func(o *stream.Options) { o.Breaker = &breaker.Options{} }) }},
		{"breaker.Options.Window", func() error { return brk(func(o *breaker.Options) { o.Window = 0 }) }},
		{"breaker.Options.MinCalls", func() error { return brk(func(o *breaker.Options) { o.MinCalls = 0 }) }},
		{"breaker.Options.FailureRatio", func() error { return brk(func(o *breaker.Options) { o.FailureRatio = 0 }) }},
		{"breaker.Options.CoolDown", func() error { return brk(func(o *breaker.Options) { o.CoolDown = 0 }) }},
		{"breaker.Options.MaxCoolDown", func() error { return brk(func(o *breaker.Options) { o.MaxCoolDown = 0 }) }},
		{"breaker.Options.Probes", func() error { return brk(func(o *breaker.Options) { o.Probes = 0 }) }},
		{"budget.Options.Ratio", func() error { return bud(func(o *budget.Options) { o.Ratio = 0 }) }},
		{"budget.Options.Window", func() error { return bud(func(o *budget.Options) { o.Window = 0 }) }},
		{"downstream.Access.ReloadInterval", func() error {
			a := cfg.Downstream.Access()
			a.TokenFile, a.ReloadInterval = "/run/secrets/token", 0
			_, err := downstream.NewHTTP(downstream.HTTPOptions{Classifier: binaryClassifier, URL: "http://127.0.0.1:1/reads", Timeout: cfg.Downstream.Timeout, Access: a})
			return err
		}},
		{"topology.Topology.DLQDuplicates", func() error {
			topo := service.Topology(cfg)
			topo.DLQDuplicates = 0
			_, err := topology.Ensure(t.Context(), js, topo)
			return err
		}},
		{"topology.Topology.Duplicates", func() error {
			topo := service.Topology(cfg)
			topo.Duplicates = 0
			_, err := topology.Ensure(t.Context(), js, topo)
			return err
		}},
		{"topology.Topology.RecordsTTL", func() error {
			topo := service.Topology(cfg)
			topo.RecordsTTL = 0
			_, err := topology.Ensure(t.Context(), js, topo)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.option, func(t *testing.T) {
			assert.Error(t, tt.build(), "%s zero: filled in by a default of the package's own", tt.option)
		})
	}
}
