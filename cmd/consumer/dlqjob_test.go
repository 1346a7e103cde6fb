package main_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	k8syaml "sigs.k8s.io/yaml"

	consumer "github.com/meterline/meter-consumer/cmd/consumer"
	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/service"
	"github.com/meterline/meter-consumer/internal/topology"
)

// The Job of deploy/tools/dlq-job.yaml runs: its arguments and its
// environment, given to this command line against a real server (NATS_URL
// pointed at it, no creds), answer with the dead-letter stream's counts.
func TestTheDLQJobsCommandRuns(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/tools/dlq-job.yaml")
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, k8syaml.UnmarshalStrict(data, &job))
	require.Len(t, job.Spec.Template.Spec.Containers, 1)
	c := job.Spec.Template.Spec.Containers[0]

	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	cfg, err := config.Load([]string{"--downstream-url", "http://127.0.0.1:1/reads", "--replicas", "1"}, nil)
	require.NoError(t, err)
	_, err = topology.Ensure(t.Context(), js, service.Topology(cfg))
	require.NoError(t, err)

	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	require.Contains(t, env, "NATS_URL")
	require.Contains(t, env, "NATS_CREDS")
	env["NATS_URL"] = s.ClientURL()
	delete(env, "NATS_CREDS") // the test server has no accounts
	var out, errOut bytes.Buffer
	code := consumer.Run(c.Args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.NotEmpty(t, out.String())
	t.Logf("%s", out.String())
}
