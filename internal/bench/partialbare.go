package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// bareRetrier is the engine matrix's baseline: the product's HTTP sink with
// the pipeline's concurrency and none of its controls, 32 goroutines that
// pull, POST each read and ack a 2xx. Any other answer, or none, is retried after the policy's
// full-jitter delay for its attempt, raised to a Retry-After as the
// pipeline's is (DelayWithFloor): the read is held in process and sent
// again when its delay is over, ahead of any read not yet called, as the
// pipeline sends its retries (a delay past holdMax goes back to the server
// with NakWithDelay instead), so that it does not bill its healthy reads
// sooner for retries the server's redelivery timer would put off. A read whose
// last attempt failed is terminated, which stands for its dead-letter (no
// copy is kept). It has no limit, no retry budget and no breaker. The
// delays it asks go to naks, the reads it terminates to gaveUp.
func bareRetrier(e *env, url string, policy retry.Policy, rnd retry.Source, naks *nakCapture, gaveUp *seqSet) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, sideBare, func(ctx context.Context) {
			nc, _, cons, cerr := connect(ctx, e, "bench-bare-retrier", durable)
			if cerr != nil {
				err = cerr
				return
			}
			sink, serr := httpSink(url)
			if serr != nil {
				nc.Close()
				err = serr
				return
			}
			b := &bareClient{sink: sink, policy: policy, rnd: rnd, naks: naks, gaveUp: gaveUp,
				fresh: make(chan jetstream.Msg), due: make(chan held, 4096), quit: make(chan struct{})}
			for range httpConcurrency {
				b.wg.Add(1)
				go b.work(ctx)
			}
			after := func() {
				close(b.quit)
				b.wg.Wait()
				sink.CloseIdle()
			}
			r, err = consume(nc, cons, b.dispatch, after, jetstream.PullMaxMessages(httpConcurrency))
		})
		return r, err
	}
}

// holdMax is the longest delay the bare client holds a read for itself, a
// third of the durable's ack wait (30s).
const holdMax = 10 * time.Second

// held is a read the bare client retries itself, and its attempt.
type held struct {
	m       jetstream.Msg
	attempt uint64
}

// bareClient is the bare client's workers: retries that are due go first.
type bareClient struct {
	sink   *downstream.HTTP
	policy retry.Policy
	rnd    retry.Source
	naks   *nakCapture
	gaveUp *seqSet
	fresh  chan jetstream.Msg // reads pulled, not called yet
	due    chan held          // reads whose retry is due
	quit   chan struct{}
	wg     sync.WaitGroup
}

func (b *bareClient) dispatch(m jetstream.Msg) {
	select {
	case b.fresh <- m:
	case <-b.quit:
	}
}

func (b *bareClient) work(ctx context.Context) {
	defer b.wg.Done()
	for {
		select { // a retry that is due before any fresh read
		case h := <-b.due:
			b.settle(ctx, h)
			continue
		default:
		}
		select {
		case h := <-b.due:
			b.settle(ctx, h)
		case m := <-b.fresh:
			md, err := m.Metadata()
			if err != nil {
				_ = m.Term()
				continue
			}
			b.settle(ctx, held{m: m, attempt: md.NumDelivered})
		case <-b.quit:
			return
		}
	}
}

// settle calls h's read and acks, retries or terminates it.
func (b *bareClient) settle(ctx context.Context, h held) {
	m := h.m
	md, merr := m.Metadata()
	read, derr := meter.Decode(m.Data())
	if merr != nil || derr != nil {
		_ = m.Term()
		return
	}
	err := b.sink.Deliver(ctx, read)
	if err == nil {
		_ = m.Ack()
		return
	}
	if b.policy.Exhausted(h.attempt) {
		b.gaveUp.add(md.Sequence.Stream)
		_ = m.Term()
		return
	}
	var retryAfter time.Duration
	if ce := (*classify.Error)(nil); errors.As(err, &ce) {
		retryAfter = ce.RetryAfter
	}
	delay := b.policy.DelayWithFloor(h.attempt, b.rnd, retryAfter)
	b.naks.record(md.Sequence.Stream, delay)
	if delay > holdMax {
		_ = m.NakWithDelay(delay)
		return
	}
	time.AfterFunc(delay, func() {
		select {
		case b.due <- held{m: m, attempt: h.attempt + 1}:
		case <-b.quit:
		}
	})
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
