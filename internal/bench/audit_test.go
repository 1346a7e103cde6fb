package bench_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/bench"
)

// TestAuditScenario runs the audit scenario with the consumer binary: the audit reports each planted finding and nothing else.
func TestAuditScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the consumer binary")
	}
	t.Parallel()
	bin, err := consumerBinary()
	require.NoError(t, err)
	cfg := bench.Smoke()
	cfg.Scenarios, cfg.AuditN, cfg.Binary = []string{bench.ScenarioAudit}, 2000, bin
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	a := rep.Audit
	require.NotNil(t, a)
	assert.Equal(t, 1, a.Exit)
	assert.True(t, a.Exact, "%v", a.Findings)
	assert.Equal(t, map[string]int{string(audit.KindMissing): 300, string(audit.KindNotInLedger): 100, string(audit.KindUnknownKey): 50}, a.Findings)
	assert.Positive(t, a.DeadLettered)
	assert.Positive(t, a.HWM)
}
