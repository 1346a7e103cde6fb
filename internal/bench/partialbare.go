package bench

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// bareRetrier is the partial scenario's baseline: a bare HTTP client with
// the pipeline's concurrency, 32 goroutines that pull, POST each read and
// ack a 2xx. Any other answer, or none, is NAKed at once with the policy's
// full-jitter delay for its attempt (the delivery count), raised to a
// Retry-After as the pipeline's is (DelayWithFloor), and left to the
// server's redelivery timer (NakWithDelay): no goroutine waits out a delay,
// so the healthy reads keep all 32. A read whose last attempt failed is
// terminated, which stands for its dead-letter (no copy is kept). It has no
// limit, no retry budget and no breaker. The delays it asks go to naks, the
// reads it terminates to gaveUp.
func bareRetrier(e *env, url string, policy retry.Policy, rnd retry.Source, naks *nakCapture, gaveUp *seqSet) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, sideBare, func(ctx context.Context) {
			nc, _, cons, cerr := connect(ctx, e, "bench-bare-retrier", durable)
			if cerr != nil {
				err = cerr
				return
			}
			p := newPoster(url, httpConcurrency)
			dispatch, stopWorkers := workerPool(httpConcurrency, func(m jetstream.Msg) {
				settleBare(ctx, p, m, policy, rnd, naks, gaveUp)
			})
			after := func() {
				stopWorkers()
				p.close()
			}
			r, err = consume(nc, cons, dispatch, after, jetstream.PullMaxMessages(httpConcurrency))
		})
		return r, err
	}
}

func settleBare(ctx context.Context, p *poster, m jetstream.Msg, policy retry.Policy, rnd retry.Source, naks *nakCapture, gaveUp *seqSet) {
	md, merr := m.Metadata()
	read, derr := meter.Decode(m.Data())
	if merr != nil || derr != nil {
		_ = m.Term()
		return
	}
	status, header, err := p.do(ctx, read.AppendJSON(make([]byte, 0, 256)), read.IdempotencyKey)
	if err == nil && status >= 200 && status < 300 {
		_ = m.Ack()
		return
	}
	if policy.Exhausted(md.NumDelivered) {
		gaveUp.add(md.Sequence.Stream)
		_ = m.Term()
		return
	}
	var retryAfter time.Duration
	if v := header.Get("Retry-After"); v != "" {
		retryAfter, _ = classify.ParseRetryAfter(v, time.Now())
	}
	delay := policy.DelayWithFloor(md.NumDelivered, rnd, retryAfter)
	naks.record(md.Sequence.Stream, delay)
	_ = m.NakWithDelay(delay)
}

// seqSet is a set of stream sequences, safe for concurrent use.
type seqSet struct {
	mu   sync.Mutex
	seqs map[uint64]bool
}

func newSeqSet() *seqSet { return &seqSet{seqs: map[uint64]bool{}} }

func (s *seqSet) add(seq uint64) {
	s.mu.Lock()
	s.seqs[seq] = true
	s.mu.Unlock()
}

// has reports whether seq was added.
func (s *seqSet) has(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seqs[seq]
}
