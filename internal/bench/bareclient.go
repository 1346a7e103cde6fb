package bench

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/retry"
)

// bareRetrier is the in-process bare client, the baseline of the storm, the
// steady and the engine matrix: the product's HTTP sink with the pipeline's
// concurrency and none of its controls (no limit, retry budget or breaker),
// 32 goroutines that POST each read pulled and ack a 2xx. Any other answer,
// or none, is retried after the delay spec gives its attempt: held in
// process and sent again when due, ahead of any read not yet called, as the
// pipeline sends its retries; or, past spec.hold, NAKed at once with
// NakWithDelay. A read whose last attempt failed is terminated, standing for
// its dead-letter. The delays it asks go to spec.naks, the reads it
// terminates to spec.gaveUp.
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
				b.wg.Go(func() { b.work(ctx) })
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
	// fixed, when set, is the delay of every retry instead: what a JetStream
	// BackOff gives (the storm's baseline).
	fixed time.Duration
	// hold is the longest delay held in process (the matrix's: holdMax); with
	// 0, every retry is NAKed with its delay.
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
type seqSet struct{ m sync.Map }

func newSeqSet() *seqSet              { return &seqSet{} }
func (s *seqSet) add(seq uint64)      { s.m.Store(seq, true) }
func (s *seqSet) has(seq uint64) bool { _, ok := s.m.Load(seq); return ok }

// nakCapture keeps every delay asked for a read, by stream sequence: the
// consumer's own account of when a read is due back. As a slog.Handler it
// takes them from the consumer's "nak" records, enabled at debug, where the
// consumer writes every one (at info a storm's are summarised); a baseline
// that NAKs by itself calls record. Pauses and credited sheds are read from
// the product's metrics, not from its lines.
type nakCapture struct {
	mu     sync.Mutex
	delays map[uint64][]asked
}

// asked is one delay asked for a read: when it was asked (the NAK), and the
// delay.
type asked struct {
	at    time.Time
	delay time.Duration
}

func newNakCapture() *nakCapture { return &nakCapture{delays: map[uint64][]asked{}} }

func (c *nakCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }
func (c *nakCapture) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *nakCapture) WithGroup(string) slog.Handler                { return c }

func (c *nakCapture) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "nak" {
		return nil
	}
	var seq uint64
	var delay time.Duration // absent when the delay asked is 0
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "stream_seq":
			seq = a.Value.Uint64()
		case "delay":
			delay = a.Value.Duration()
		}
		return true
	})
	c.record(seq, delay)
	return nil
}

// record keeps the delay asked now for the read at stream sequence seq. The
// time is taken here, a monotonic reading that compares safely with the rate
// engine's.
func (c *nakCapture) record(seq uint64, delay time.Duration) {
	now := time.Now()
	c.mu.Lock()
	c.delays[seq] = append(c.delays[seq], asked{at: now, delay: delay})
	c.mu.Unlock()
}

// all returns every delay asked for the read at stream sequence seq, in the
// order they were asked.
func (c *nakCapture) all(seq uint64) []asked {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delays[seq]
}
