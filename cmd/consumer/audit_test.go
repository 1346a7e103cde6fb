package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// TestAuditOfTheServicesWork runs the service against a rate engine that
// refuses two reads, then audits the period with the engine's own ledger:
// explained (exit 0); then a read is deleted from the stream and the audit
// says so (exit 1).
func TestAuditOfTheServicesWork(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	_, js := natstest.Connect(t, s)
	eng, err := simengine.New(simengine.Options{Answer: func(key string, _ int) (int, http.Header) {
		if strings.HasPrefix(key, "BAD-") {
			return http.StatusUnprocessableEntity, nil
		}
		return http.StatusOK, nil
	}})
	require.NoError(t, err)
	down := httptest.NewServer(eng)
	defer down.Close()

	p := start(t, "--nats-url", s.ClientURL(), "--create-streams", "--downstream-url", down.URL, "--http-addr", "")
	httpAddr(t, p)
	for i := range 6 {
		meter := fmt.Sprintf("MTR-%d", i)
		if i%3 == 1 {
			meter = fmt.Sprintf("BAD-%d", i)
		}
		_, err := js.Publish(t.Context(), "meter.reads.north", fmt.Appendf(nil,
			`{"meter_id":%q,"read_at":"2026-11-30T07:00:00Z","quantity":"2.000","unit":"kWh"}`, meter))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		c, err := js.Consumer(t.Context(), "METER_READS", "meter-consumer")
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Stream == 6
	}, 20*time.Second, 20*time.Millisecond, "every read settled")
	require.Equal(t, 0, stop(p, 15*time.Second))

	var keys []string
	for k, calls := range eng.Ledger() {
		if slices.ContainsFunc(calls, func(c simengine.Call) bool { return c.Outcome == simengine.Billed }) {
			keys = append(keys, k)
		}
	}
	require.Len(t, keys, 4)
	ledger := filepath.Join(t.TempDir(), "ledger.csv")
	require.NoError(t, os.WriteFile(ledger, []byte("billed_at,idempotency_key\n2026-11-30,"+strings.Join(keys, "\n2026-11-30,")+"\n"), 0o600))

	args := []string{"audit", "--nats-url", s.ClientURL(), "--from-seq", "1", "--to-seq", "6",
		"--engine-ledger", ledger, "--engine-ledger-column", "idempotency_key"}
	out, errOut, code := runTool(t, args...)
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "every read of the period is explained")
	assert.Regexp(t, `billed\s+4\s`, out)
	assert.Regexp(t, `dead-lettered\s+2\s`, out)
	assert.Contains(t, errOut, `level=INFO msg="consumer audit" explained=true findings=0 period="sequences 1 to 6" reads=6 billed=4 billed_basis=ledger acked=4 dead_lettered=2 replayed=0 purged=0 unsettled=0 missing=0`+"\n")

	st, err := js.Stream(t.Context(), "METER_READS")
	require.NoError(t, err)
	require.NoError(t, st.DeleteMsg(t.Context(), 3))
	out, errOut, code = runTool(t, append(args, "--json")...)
	require.Equal(t, 1, code, out+errOut)
	assert.Contains(t, errOut, `msg="consumer audit" explained=false findings=2 period="sequences 1 to 6" reads=5 billed=3 billed_basis=ledger acked=3 dead_lettered=2 replayed=0 purged=0 unsettled=0 missing=1 by_kind.missing=1 by_kind.ledger_key_unknown=1`+"\n")
	var doc struct {
		Explained bool
		Findings  []struct {
			Kind  string
			Seq   uint64
			ToSeq uint64 `json:"to_seq"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.False(t, doc.Explained)
	require.Len(t, doc.Findings, 2, out)
	assert.Equal(t, "missing", doc.Findings[0].Kind)
	assert.Equal(t, "ledger_key_unknown", doc.Findings[1].Kind, "the deleted read's key is billed, and no read of the period has it")
}

func TestAuditFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		give     []string
		wantCode int
		want     string
	}{
		{"help", []string{"--help"}, 0, "--engine-ledger file"},
		{"no period", nil, 2, "no period: give --since and --until, --day, or --from-seq and --to-seq"},
		{"half a period", []string{"--since", "24h"}, 2, "give both --since and --until"},
		{"both kinds", []string{"--since", "24h", "--until", "1h", "--from-seq", "1", "--to-seq", "2"}, 2, "not both"},
		{"backwards", []string{"--from-seq", "5", "--to-seq", "2"}, 2, "--from-seq 5 is after --to-seq 2"},
		{"bad time", []string{"--since", "yesterday", "--until", "1h"}, 2, `--since: invalid time "yesterday"`},
		{"bad day", []string{"--day", "30/11/2026"}, 2, `--day "30/11/2026": want YYYY-MM-DD or yesterday`},
		{"column without ledger", []string{"--day", "yesterday", "--engine-ledger-column", "key"}, 2, "--engine-ledger-column without --engine-ledger"},
		{"no ledger file", []string{"--day", "2026-11-30", "--engine-ledger", "/nonexistent/ledger"}, 2, "--engine-ledger: open /nonexistent/ledger"},
		{"sort memory", []string{"--day", "2026-11-30", "--sort-memory", "0"}, 2, "--sort-memory 0: want 1 MiB or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runTool(t, append([]string{"audit"}, tt.give...)...)
			assert.Equal(t, tt.wantCode, code, out+errOut)
			assert.Contains(t, out+errOut, tt.want)
		})
	}
}

// A ledger column that the ledger's header row lacks is a bad flag, refused
// before the audit connects (it failed with exit 1 once the whole period
// had been walked).
func TestAuditRefusesALedgerColumnItsHeaderLacks(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "ledger.csv")
	require.NoError(t, os.WriteFile(file, []byte("\ufeffidempotency_key,amount\nK-1,2\n"), 0o600))
	_, stderr, code := runTool(t, "audit", "--nats-url", "nats://127.0.0.1:1", "--from-seq", "1", "--to-seq", "2",
		"--engine-ledger", file, "--engine-ledger-column", "key")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, `--engine-ledger-column "key": no such column in `+file+"'s header row (idempotency_key,amount)")
	_, stderr, code = runTool(t, "audit", "--nats-url", "nats://127.0.0.1:1", "--from-seq", "1", "--to-seq", "2",
		"--engine-ledger", file, "--engine-ledger-column", "idempotency_key")
	assert.Equal(t, 1, code, "the column found (past the byte order mark), the audit goes on to connect: %s", stderr)
}
