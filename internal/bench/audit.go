package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/audit"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

// What the audit scenario plants, besides its dead-lettered reads.
const (
	auditDeleted  = 300 // isolated sequences deleted from the stream
	auditUnbilled = 100 // billed reads whose key the ledger lacks
	auditExtra    = 50  // ledger keys no read has
	auditDeadEach = 33  // every 33rd read dead-lettered: 3%
)

// Audit is "consumer audit", run as the binary on a settled backlog with
// planted findings.
type Audit struct {
	Skipped      string         `json:"skipped,omitempty"`
	N            int            `json:"n"`
	DeadLettered int            `json:"dead_lettered"`
	Setup        time.Duration  `json:"setup_ns"` // publish, settle, delete, write the ledger
	Took         time.Duration  `json:"took_ns"`  // the audit's run
	ReadsPerSec  float64        `json:"reads_per_sec"`
	HWM          int64          `json:"vm_hwm_bytes"`
	Exit         int            `json:"exit"`
	Findings     map[string]int `json:"findings"` // by kind
	// Exact: every planted finding reported, and nothing else.
	Exact bool `json:"exact"`
}

func runAudit(ctx context.Context, e *env, cfg Config) (*Audit, error) {
	out := &Audit{N: cfg.AuditN}
	if cfg.Binary == "" {
		out.Skipped = "no consumer binary"
		return out, nil
	}
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "bench-audit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	planted, err := plantAudit(ctx, e, cfg.AuditN, filepath.Join(dir, "ledger.csv"))
	if err != nil {
		return nil, err
	}
	out.DeadLettered, out.Setup = planted.dead, time.Since(t0)
	cfg.progress("audit: %d reads settled, %d dead-lettered, %d deleted, in %s", cfg.AuditN, planted.dead, auditDeleted, out.Setup.Round(time.Second))

	cmd := exec.Command(cfg.Binary, "audit", "--nats-url", e.url, "--from-seq", "1", "--to-seq", strconv.Itoa(cfg.AuditN),
		"--engine-ledger", filepath.Join(dir, "ledger.csv"), "--engine-ledger-column", "idempotency_key", "--json")
	cmd.Env = append(append(os.Environ(), "TMPDIR="+dir), cfg.BinaryEnv...)
	var stdout bytes.Buffer
	stderr := &tail{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Binary, err)
	}
	exited, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if _, hwm, err := procStatus(cmd.Process.Pid); err == nil {
				out.HWM = max(out.HWM, hwm)
			}
			select {
			case <-exited:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err = cmd.Wait()
	out.Took = time.Since(t0)
	close(exited)
	<-sampled
	out.ReadsPerSec = float64(cfg.AuditN) / out.Took.Seconds()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out.Exit = ee.ExitCode()
	} else if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var rep struct {
		Findings []audit.Finding `json:"findings"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("audit (exit %d): %w: %s", out.Exit, err, stderr.String())
	}
	out.Findings = map[string]int{}
	exact := out.Exit == 1
	for _, f := range rep.Findings {
		out.Findings[string(f.Kind)]++
		switch f.Kind {
		case audit.KindMissing:
			exact = exact && f.Seq == f.ToSeq && planted.deleted[f.Seq]
		case audit.KindNotInLedger:
			exact = exact && planted.unbilled[f.Key]
		case audit.KindUnknownKey:
		default:
			exact = false
		}
	}
	out.Exact = exact && out.Findings[string(audit.KindMissing)] == auditDeleted &&
		out.Findings[string(audit.KindNotInLedger)] == auditUnbilled && out.Findings[string(audit.KindUnknownKey)] == auditExtra
	cfg.progress("audit: %d reads in %s, %.0f/s, VmHWM %d MiB, exact %t", cfg.AuditN, out.Took.Round(time.Millisecond), out.ReadsPerSec, out.HWM>>20, out.Exact)
	return out, nil
}

// planted is what plantAudit did.
type planted struct {
	dead     int
	deleted  map[uint64]bool
	unbilled map[string]bool
}

// plantAudit publishes n reads, settles them on the production durable
// (every auditDeadEach-th dead-lettered with its copy confirmed, the rest
// acked a batch at a time), deletes auditDeleted isolated sequences, and
// writes the engine's ledger: every billed read's key but auditUnbilled,
// and auditExtra keys of no read.
func plantAudit(ctx context.Context, e *env, n int, ledger string) (planted, error) {
	p := planted{deleted: map[uint64]bool{}, unbilled: map[string]bool{}}
	if err := e.reset(ctx); err != nil {
		return p, err
	}
	ccfg := e.topo.ConsumerConfig()
	ccfg.AckPolicy = jetstream.AckAllPolicy // a batch settled by its last read; the audit reads only the ack floor
	cons, err := e.js.CreateConsumer(ctx, e.topo.Stream, ccfg)
	if err != nil {
		return p, fmt.Errorf("create durable: %w", err)
	}
	if _, err := publishBacklog(ctx, e.js, 0, n); err != nil {
		return p, err
	}
	stride := uint64(max(n/auditDeleted, 2))
	for seq := uint64(7); len(p.deleted) < min(auditDeleted, n/2) && seq <= uint64(n); seq += stride {
		p.deleted[seq] = true
	}
	f, err := os.Create(ledger)
	if err != nil {
		return p, err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "billed_at,idempotency_key")
	for done := 0; done < n; {
		batch, err := cons.Fetch(5000, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return p, fmt.Errorf("fetch: %w", err)
		}
		var last jetstream.Msg
		for m := range batch.Messages() {
			done++
			last = m
			md, err := m.Metadata()
			if err != nil {
				return p, err
			}
			seq := md.Sequence.Stream
			switch {
			case p.deleted[seq]:
			case seq%auditDeadEach == 0:
				p.dead++
				c := dlq.Build(e.topo.DLQPrefix, dlq.Entry{Reason: dlq.ReasonExhausted, Cause: classify.Cause("http_503"),
					Stream: e.topo.Stream, Consumer: e.topo.Durable, Subject: m.Subject(), Sequence: seq, Deliveries: 6,
					PublishedAt: md.Timestamp, Data: m.Data()}, md.Timestamp)
				if _, err := e.js.PublishMsgAsync(c); err != nil {
					return p, err
				}
			case seq > 1000 && len(p.unbilled) < auditUnbilled:
				p.unbilled[Key(int(seq-1))] = true
			default:
				fmt.Fprintf(w, "2026-11-30,%s\n", Key(int(seq-1)))
			}
		}
		if err := batch.Error(); err != nil {
			return p, err
		}
		if last == nil {
			return p, fmt.Errorf("fetch: no reads after %d of %d", done, n)
		}
		if err := last.DoubleAck(ctx); err != nil {
			return p, err
		}
		select {
		case <-e.js.PublishAsyncComplete():
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
	for i := range auditExtra {
		fmt.Fprintf(w, "2026-11-30,GHOST-%d\n", i)
	}
	if err := w.Flush(); err != nil {
		return p, err
	}
	st, err := e.js.Stream(ctx, e.topo.Stream)
	if err != nil {
		return p, err
	}
	for seq := range p.deleted {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			return p, fmt.Errorf("delete seq %d: %w", seq, err)
		}
	}
	return p, nil
}
