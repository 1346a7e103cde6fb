package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/config"
)

func TestUnknownEnv(t *testing.T) {
	got := config.UnknownEnv([]string{
		"CONSUMER_CONCURRENCY=8",          // a setting
		"CONSUMER_CONFIG=/etc/c.yaml",     // the file
		"CONSUMER_CONCURENCY=5",           // misspelt
		"CONSUMER_ACKWAIT=5s",             // misspelt
		"CONSUMER_PORT=tcp://10.0.0.1:80", // a Kubernetes service link
		"NATS_CONTEXT=prod",               // the nats CLI's, not ours
		"PATH=/usr/bin",
		"CONSUMER_EMPTY",
	})
	assert.Equal(t, []config.Unknown{
		{Name: "CONSUMER_ACKWAIT", Closest: "CONSUMER_ACK_WAIT"},
		{Name: "CONSUMER_CONCURENCY", Closest: "CONSUMER_CONCURRENCY"},
		{Name: "CONSUMER_EMPTY"},
		{Name: "CONSUMER_PORT"},
	}, got)
	assert.Empty(t, config.UnknownEnv(nil))
}
