package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/meter"
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
	bo := service.BreakerOptions(cfg.Breaker)
	require.NotNil(t, bo, "breaker.enabled is true by default")
	b := cfg.Breaker
	assert.Equal(t, breaker.Options{Window: b.Window, MinCalls: b.MinCalls, FailureRatio: float64(b.FailurePercent) / 100,
		CoolDown: b.CoolDown, MaxCoolDown: b.MaxCoolDown, Probes: b.Probes}, *bo)

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
		if err := stream.Engine(&o, engine.Options{}, service.BreakerOptions(cfg.Breaker)); err != nil {
			return err
		}
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
		{"stream.Engine's breaker.Options", func() error {
			o := service.PipelineOptions(cfg)
			return stream.Engine(&o, engine.Options{}, &breaker.Options{})
		}},
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

// Pipeline refuses a handler timeout the durable's ack wait does not
// exceed, naming the settings, before it builds anything.
func TestPipelineRefusesAHandlerTimeoutTheAckWaitDoesNotExceed(t *testing.T) {
	for _, handler := range []time.Duration{2 * time.Second, 3 * time.Second} {
		cfg := config.Default()
		cfg.Consumer.HandlerTimeout = handler
		c, lim, err := service.Pipeline(cfg, service.Parts{Set: &topology.Setup{AckWait: 2 * time.Second}, Sink: downstream.Discard{}})
		require.Error(t, err, "handler timeout %s", handler)
		assert.Nil(t, c)
		assert.Nil(t, lim)
		assert.Contains(t, err.Error(), "consumer.handler_timeout ("+handler.String()+") must be shorter than the durable's ack wait (2s)")
	}
}

// Pipeline refuses a pull batch given whose rounds of handler timeouts the
// durable's ack wait does not exceed, though the configuration's own ack
// wait did (an existing durable's is followed).
func TestPipelineRefusesAPullBatchTheDurablesAckWaitDoesNotExceed(t *testing.T) {
	cfg := config.Default()
	cfg.Consumer.PullBatch, cfg.Consumer.AckWait = 128, time.Minute // 4 rounds of 6s: 24s
	c, lim, err := service.Pipeline(cfg, service.Parts{Set: &topology.Setup{AckWait: 10 * time.Second}, Sink: downstream.Discard{}})
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Nil(t, lim)
	assert.Contains(t, err.Error(), "consumer.pull_batch (128) / consumer.concurrency (32) rounds of consumer.handler_timeout (6s) = 24s must be shorter than the durable's ack wait (10s)")
}

// refusing is a sink the rate engine refuses every read on for good (422).
type refusing struct{}

func (refusing) Deliver(context.Context, meter.Read) error {
	return classify.NewPermanent(classify.CauseHTTP422, errors.New("422"))
}
func (refusing) Timeout() time.Duration { return time.Second }

// A set-up whose records have no bucket (Records.KV nil) builds a pipeline
// that keeps no records and still settles: a read refused for good is
// dead-lettered and TERMed, its decision written nowhere. With the
// durable's bucket the same decision is on record.
func TestPipelineWithoutARecordsBucketKeepsNoRecords(t *testing.T) {
	for _, tt := range []struct {
		name    string
		records bool
	}{{"the durable's bucket", true}, {"no bucket", false}} {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Run(t)
			nc, js := natstest.Connect(t, s)
			cfg := config.Default()
			set, err := topology.Ensure(t.Context(), js, service.Topology(cfg))
			require.NoError(t, err)
			bucket := set.Records.KV
			if !tt.records {
				set.Records = stream.KVRecords{}
			}
			reg := prometheus.NewRegistry()
			c, lim, err := service.Pipeline(cfg, service.Parts{Conn: nc, JS: js, Set: set, Sink: refusing{}, Registry: reg, Rand: retry.NewRand(1)})
			require.NoError(t, err)
			assert.NotNil(t, lim, "downstream.adaptive is true by default")
			_, err = js.Publish(t.Context(), "meter.reads.test", []byte(`{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1.5","unit":"kWh"}`))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx, set.Consumer) }()
			require.Eventually(t, func() bool {
				info, err := set.Consumer.Info(t.Context())
				return err == nil && info.AckFloor.Stream == 1
			}, 10*time.Second, 20*time.Millisecond, "the read is settled")
			cancel()
			require.NoError(t, <-done)
			dl, err := js.Stream(t.Context(), cfg.DLQ.Stream)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), dl.CachedInfo().State.Msgs, "the dead-letter copy")
			keys, err := bucket.ListKeys(t.Context())
			require.NoError(t, err)
			var n int
			for range keys.Keys() {
				n++
			}
			if tt.records {
				assert.Equal(t, 1, n, "the decision on record")
			} else {
				assert.Zero(t, n, "nothing on record")
			}
			mfs, err := reg.Gather()
			require.NoError(t, err)
			for _, mf := range mfs {
				if mf.GetName() == "meter_consumer_record_errors_total" {
					for _, m := range mf.GetMetric() {
						assert.Zero(t, m.GetCounter().GetValue(), "record errors")
					}
				}
			}
		})
	}
}

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier, _ = config.Default().Downstream.Classifier()
