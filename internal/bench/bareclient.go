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

// bareRetrier is the in-process bare client, the baseline of the storm,
// the steady and the engine matrix: the product's HTTP sink with the
// pipeline's concurrency and none of its controls (no limit, retry budget
// or breaker), 32 goroutines that POST each read pulled and ack a 2xx. Any
// other answer, or none, is retried after the delay spec gives its attempt:
// held in process and sent again when it is over, ahead of any read not yet
// called, as the pipeline sends its retries; or, past spec.hold, NAKed at
// once with NakWithDelay, left to the server's redelivery timer. A read
// whose last attempt failed is terminated, which stands for its
// dead-letter (no copy is kept). The delays it asks go to spec.naks, the
// reads it terminates to spec.gaveUp.
func bareRetrier(e *env, spec bareSpec) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		labelled(ctx, sideBare, func(ctx context.Context) {
			sink, serr := httpSink(spec.url)
			if serr != nil {
				err = serr
				return
			}
			b := &bareClient{bareSpec: spec, sink: sink, fresh: make(chan jetstream.Msg), due: make(chan held, 4096), quit: make(chan struct{})}
			for range httpConcurrency {
				b.wg.Add(1)
				go b.work(ctx)
			}
			r, err = consume(ctx, e, "bench-bare", durable, b.dispatch, func() {
				close(b.quit)
				b.wg.Wait()
				sink.CloseIdle()
			}, spec.opts...)
		})
		return r, err
	}
}

// bareSpec is where the bare client posts and how it retries.
type bareSpec struct {
	url    string
	policy retry.Policy // its attempts, and its full-jitter delays raised to a Retry-After (DelayWithFloor)
	rnd    retry.Source
	// fixed, when set, is the delay of every retry instead: what a
	// JetStream BackOff gives (the storm's baseline).
	fixed time.Duration
	// hold is the longest delay held in process (the matrix's: holdMax);
	// with 0, every retry is NAKed with its delay (the storm's and the
	// steady's baselines).
	hold   time.Duration
	naks   *nakCapture
	gaveUp *seqSet
	opts   []jetstream.PullConsumeOpt
}

// holdMax is the longest delay the matrix's bare client holds a read for
// itself, a third of the durable's ack wait (30s).
const holdMax = 10 * time.Second

// held is a read the bare client retries itself, and its attempt.
type held struct {
	m       jetstream.Msg
	attempt uint64
}

// bareClient is the bare client's workers: retries that are due go first.
type bareClient struct {
	bareSpec
	sink  *downstream.HTTP
	fresh chan jetstream.Msg // reads pulled, not called yet
	due   chan held          // reads whose retry is due
	quit  chan struct{}
	wg    sync.WaitGroup
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
	delay := b.fixed
	if delay == 0 {
		delay = b.policy.DelayWithFloor(h.attempt, b.rnd, retryAfter)
	}
	b.naks.record(md.Sequence.Stream, delay)
	if delay > b.hold {
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
