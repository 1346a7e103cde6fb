package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/config"
)

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
