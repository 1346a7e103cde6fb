//go:build auditscale

package audit_test

// The audit's figures at scale: AUDIT_SCALE_N reads (default 1,000,000),
// 3% dead-lettered, 300 deleted from the stream, an engine ledger missing
// 100 billed keys and holding 50 no read has. The audit runs as the product
// binary (built without -race) in its own process, so that its peak RSS is
// its own and not the embedded server's:
//
//	go test -tags auditscale -run TestAuditAtScale -v -timeout 0 ./internal/audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { proctest.Main(m, false, &binary) }

func TestAuditAtScale(t *testing.T) {
	n := 1_000_000
	if v := os.Getenv("AUDIT_SCALE_N"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	const deleted, unbilled, extra = 300, 100, 50
	e := newEnv(t)
	ctx := t.Context()
	require.NoError(t, e.js.DeleteConsumer(ctx, srcName, durable)) // ack all: a batch settled by its last read
	cons, err := e.js.CreateOrUpdateConsumer(ctx, srcName, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckAllPolicy, AckWait: time.Hour, MaxAckPending: -1,
	})
	require.NoError(t, err)

	began := time.Now()
	for i := 1; i <= n; i++ {
		body := fmt.Appendf(nil, `{"meter_id":"MTR-%d","read_at":"2026-11-30T06:00:00Z","quantity":"1.000","unit":"kWh","idempotency_key":%q}`, i, key(i))
		_, err := e.js.PublishAsync(fmt.Sprintf("meter.reads.r%d", i%7), body)
		require.NoError(t, err)
		if i%10000 == 0 {
			<-e.js.PublishAsyncComplete()
		}
	}
	<-e.js.PublishAsyncComplete()
	t.Logf("published %d reads in %s", n, time.Since(began))

	// The fleet, in a hurry: every 33rd read dead-lettered (its copy
	// confirmed), the rest acked, each batch by its last read.
	deadAt := func(seq uint64) bool { return seq%33 == 0 }
	stride := uint64(n / deleted)
	delAt := func(seq uint64) bool { return seq%stride == 7 && seq/stride < deleted } // isolated, never dead-lettered
	var dead int
	for done := 0; done < n; {
		batch, err := cons.Fetch(5000, jetstream.FetchMaxWait(10*time.Second))
		require.NoError(t, err)
		var last jetstream.Msg
		for m := range batch.Messages() {
			done++
			last = m
			md, err := m.Metadata()
			require.NoError(t, err)
			if seq := md.Sequence.Stream; deadAt(seq) && !delAt(seq) {
				dead++
				c := dlq.Build(prefix, dlq.Entry{Reason: dlq.ReasonExhausted, Cause: classify.Cause("http_503"),
					Stream: srcName, Consumer: durable, Subject: m.Subject(), Sequence: seq, Deliveries: 6,
					PublishedAt: md.Timestamp, Data: m.Data()}, md.Timestamp)
				_, err := e.js.PublishMsgAsync(c)
				require.NoError(t, err)
			}
		}
		require.NoError(t, batch.Error())
		require.NoError(t, last.DoubleAck(ctx))
		<-e.js.PublishAsyncComplete()
	}
	var dels []uint64
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if delAt(seq) {
			require.NoError(t, e.src.DeleteMsg(ctx, seq))
			dels = append(dels, seq)
		}
	}
	require.Len(t, dels, deleted)
	t.Logf("settled %d (%d dead-lettered), deleted %d, by %s", n, dead, len(dels), time.Since(began))

	// The ledger: every billed read's key but the first 100 billed after
	// seq 1000, and 50 keys of no read, as CSV.
	ledgerPath := filepath.Join(t.TempDir(), "ledger.csv")
	f, err := os.Create(ledgerPath)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "billed_at,idempotency_key")
	missing := map[string]bool{}
	for i := 1; i <= n; i++ {
		seq := uint64(i)
		if deadAt(seq) || delAt(seq) {
			continue
		}
		if i > 1000 && len(missing) < unbilled {
			missing[key(i)] = true
			continue
		}
		fmt.Fprintf(w, "2026-11-30,%s\n", key(i))
	}
	for i := range extra {
		fmt.Fprintf(w, "2026-11-30,GHOST-%d\n", i)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	cmd := exec.Command(binary, "audit", "--nats-url", e.nc.ConnectedUrl(), "--from-seq", "1", "--to-seq", strconv.Itoa(n),
		"--engine-ledger", ledgerPath, "--engine-ledger-column", "idempotency_key", "--json")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}, strings.Fields(os.Getenv("AUDIT_SCALE_ENV"))...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	require.NoError(t, cmd.Start())
	// VmHWM of the audit's own process, polled until it exits: the rusage
	// of a child started by vfork counts the parent's RSS (the test, with
	// the server's million reads) from before the exec.
	var hwm uint64
	exited, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v, ok := vmHWM(cmd.Process.Pid); ok {
				hwm = max(hwm, v)
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-exited:
				return
			}
		}
	}()
	err = cmd.Wait()
	took := time.Since(start)
	close(exited)
	<-done
	var ee *exec.ExitError
	if p := os.Getenv("AUDIT_SCALE_STDERR"); p != "" {
		require.NoError(t, os.WriteFile(p, errOut.Bytes(), 0o600)) // e.g. with AUDIT_SCALE_ENV=GODEBUG=gctrace=1
	}
	require.ErrorAs(t, err, &ee, errOut.String())
	require.Equal(t, 1, ee.ExitCode(), errOut.String())
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	t.Logf("audit of %d reads: %s, %.0f reads/s, peak RSS (VmHWM) %.1f MiB, user %s, sys %s",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(hwm)/(1<<20),
		time.Duration(ru.Utime.Nano()).Round(time.Millisecond), time.Duration(ru.Stime.Nano()).Round(time.Millisecond))

	var doc struct {
		Summary  audit.Summary
		Findings []audit.Finding
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	kinds := map[audit.Kind]int{}
	gotMissing, gotUnbilled, gotGhost := map[uint64]bool{}, map[string]bool{}, 0
	for _, f := range doc.Findings {
		kinds[f.Kind]++
		switch f.Kind {
		case audit.KindMissing:
			gotMissing[f.Seq] = f.Seq == f.ToSeq
		case audit.KindNotInLedger:
			gotUnbilled[f.Key] = true
		case audit.KindUnknownKey:
			gotGhost++
		}
	}
	assert.Equal(t, map[audit.Kind]int{audit.KindMissing: deleted, audit.KindNotInLedger: unbilled, audit.KindUnknownKey: extra}, kinds,
		"every planted finding, nothing else")
	for _, seq := range dels {
		assert.True(t, gotMissing[seq], "seq %d", seq)
	}
	assert.Equal(t, missing, gotUnbilled)
	assert.Equal(t, uint64(dead), doc.Summary.DeadLettered)
	assert.Equal(t, uint64(n-deleted-dead), doc.Summary.Billed)
}

// vmHWM reads the peak resident set of pid from /proc/<pid>/status.
func vmHWM(pid int) (uint64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
