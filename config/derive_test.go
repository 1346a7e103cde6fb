package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

// A setting whose valid range depends on another defaults to a value
// derived from the ones given; only a contradiction between given settings
// is refused.
func TestDependentDefaultsAreDerived(t *testing.T) {
	tests := []struct {
		name                           string
		give                           []string
		wantAck, wantHandler, wantDown time.Duration
	}{
		{"none given", nil, 30 * time.Second, 6 * time.Second, 5 * time.Second},
		{"a short ack wait", []string{"--ack-wait", "5s"}, 5 * time.Second, 4 * time.Second, 3333333333},
		{"a one-second ack wait", []string{"--ack-wait", "1s"}, time.Second, 800 * time.Millisecond, 666666666},
		{"a long downstream timeout", []string{"--downstream-timeout", "20s"}, 48 * time.Second, 24 * time.Second, 20 * time.Second},
		{"a long handler timeout", []string{"--handler-timeout", "40s"}, 80 * time.Second, 40 * time.Second, 5 * time.Second},
		{"a short handler timeout", []string{"--handler-timeout", "1s"}, 30 * time.Second, time.Second, 833333333},
		{"ack wait and downstream", []string{"--ack-wait", "10s", "--downstream-timeout", "7s"}, 10 * time.Second, 8400 * time.Millisecond, 7 * time.Second},
		{"all given", []string{"--ack-wait", "10s", "--handler-timeout", "9s", "--downstream-timeout", "8s"}, 10 * time.Second, 9 * time.Second, 8 * time.Second},
		{"a large pull batch", []string{"--pull-batch", "256"}, 54 * time.Second, 6 * time.Second, 5 * time.Second},
		{"a large pull batch and an ack wait", []string{"--pull-batch", "256", "--ack-wait", "30s"}, 30 * time.Second, 3333333333, 2777777777},
		{"a pull batch of a round", []string{"--pull-batch", "32"}, 30 * time.Second, 6 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(append([]string{"--demo"}, tt.give...), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAck, cfg.Consumer.AckWait, "ack wait")
			assert.Equal(t, tt.wantHandler, cfg.Consumer.HandlerTimeout, "handler timeout")
			assert.Equal(t, tt.wantDown, cfg.Downstream.Timeout, "downstream timeout")
		})
	}
}

// With nothing given, the derived settings are Default()'s own: derive
// starts from Default(), not from a copy of its values.
func TestNothingGivenDerivesDefault(t *testing.T) {
	cfg, err := config.Load([]string{"--demo"}, nil)
	require.NoError(t, err)
	def := config.Default()
	assert.Equal(t, def.Consumer.AckWait, cfg.Consumer.AckWait)
	assert.Equal(t, def.Consumer.HandlerTimeout, cfg.Consumer.HandlerTimeout)
	assert.Equal(t, def.Downstream.Timeout, cfg.Downstream.Timeout)
}

func TestDerivedFromTheFileAndTheEnvironmentToo(t *testing.T) {
	path := writeFile(t, "consumer:\n  ack_wait: 5s\n")
	cfg, err := config.Load([]string{"--demo", "--config", path}, nil)
	require.NoError(t, err)
	assert.Equal(t, 4*time.Second, cfg.Consumer.HandlerTimeout)

	cfg, err = config.Load([]string{"--demo"}, env(map[string]string{"CONSUMER_DOWNSTREAM_TIMEOUT": "10s"}))
	require.NoError(t, err)
	assert.Equal(t, 12*time.Second, cfg.Consumer.HandlerTimeout)
}

func TestExplicitContradictionsAreRefused(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string
	}{
		{"handler timeout past the ack wait", []string{"--ack-wait", "5s", "--handler-timeout", "6s"}, "consumer.handler_timeout (6s) must be < consumer.ack_wait (5s)"},
		{"downstream timeout past the ack wait", []string{"--ack-wait", "5s", "--downstream-timeout", "10s"}, "downstream.timeout (10s) must be < consumer.handler_timeout (4s)"},
		{"downstream past the handler", []string{"--handler-timeout", "2s", "--downstream-timeout", "3s"}, "downstream.timeout (3s) must be < consumer.handler_timeout (2s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(append([]string{"--demo"}, tt.give...), nil)
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestProductionRefusesTheEmbeddedServer(t *testing.T) {
	_, err := config.Load([]string{"--demo", "--nats-embedded=false"}, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, `nats.url ("") is required when nats.embedded is false`)
	_, err = config.Load([]string{"--demo", "--nats-url", "nats://nats:4222"}, env(map[string]string{"CONSUMER_NATS_EMBEDDED": "false"}))
	require.NoError(t, err)
}

// What --create-streams makes on a real server is not a single copy unless
// someone says so: stream.replicas, when not given, is 3 with nats.url and
// 1 on the embedded server; given, it is what was given (1 included).
func TestReplicasDefaultToThreeOnARealServer(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"real server, not given", []string{"--nats-url", "nats://nats:4222"}, nil, 3},
		{"real server, given 1", []string{"--nats-url", "nats://nats:4222", "--replicas", "1"}, nil, 1},
		{"real server, 1 from the environment", []string{"--nats-url", "nats://nats:4222"}, map[string]string{"CONSUMER_REPLICAS": "1"}, 1},
		{"real server, given 5", []string{"--nats-url", "nats://nats:4222", "--replicas", "5"}, nil, 5},
		{"embedded server, not given", nil, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(append(tt.args, "--downstream-url", downstream), env(tt.env))
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Stream.Replicas)
		})
	}
}
