package bench

import (
	"cmp"
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

// bare starts the bench's one bare baseline, a Consume loop with none of
// the pipeline's controls (no limit, retry budget, breaker or records). With
// a url it posts each read with the product's HTTP sink and acks a 2xx; any
// other answer, or none, is NAKed at once, or with a policy retried after
// the delay it gives the attempt: held in process and sent again when due,
// ahead of any read not yet called, as the pipeline sends its retries, or,
// past hold, NAKed with NakWithDelay. A read whose last attempt failed is
// terminated, standing for its dead-letter. Without a url it acks each read
// (after decoding it, with decode): the overhead's loops.
func bare(e *env, spec bareSpec) starter {
	return func(ctx context.Context, durable string) (r *running, err error) {
		side := cmp.Or(spec.side, sideBare)
		labelled(ctx, side, func(ctx context.Context) {
			b := &bareClient{bareSpec: spec, fresh: make(chan jetstream.Msg), due: make(chan held, 4096), quit: make(chan struct{})}
			if spec.url != "" {
				if b.sink, err = httpSink(spec.url); err != nil {
					return
				}
			}
			dispatch := func(m jetstream.Msg) { b.settle(ctx, held{m: m}) }
			if spec.workers > 0 {
				dispatch = b.dispatch
				for range spec.workers {
					b.wg.Go(func() { b.work(ctx) })
				}
			}
			var opts []jetstream.PullConsumeOpt
			if spec.pull > 0 {
				opts = append(opts, jetstream.PullMaxMessages(spec.pull))
			}
			r, err = consume(ctx, e, "bench-"+side, durable, dispatch, b.stop, opts...)
		})
		return r, err
	}
}

// bareSpec is what the bare baseline does with a read.
type bareSpec struct {
	side    string // its pprof side, and connection name bench-<side> (default sideBare)
	url     string // where it posts; "" posts nothing
	decode  bool   // without a url: decode each read before its ack
	workers int    // goroutines settling reads; 0: Consume's callback settles them (without a url: a retry needs workers)
	pull    int    // PullMaxMessages; 0: nats.go's default
	// policy gives its attempts, and its full-jitter delays raised to a
	// Retry-After (DelayWithFloor); zero: a failed read is NAKed at once.
	policy retry.Policy
	rnd    retry.Source
	// fixed, when set, is the delay of every retry instead: what a JetStream
	// BackOff gives (the storm's baseline).
	fixed time.Duration
	// hold is the longest delay held in process (the matrix's: holdMax); with
	// 0, every retry is NAKed with its delay.
	hold   time.Duration
	naks   *nakCapture // gets the delays asked, when set
	gaveUp *seqSet     // gets the reads terminated, when set
}

// holdMax is the longest delay the matrix's bare client holds a read for
// itself, a third of the durable's ack wait (30s).
const holdMax = 10 * time.Second

// held is a read the bare client retries itself, and its attempt (0: its
// delivery count).
type held struct {
	m       jetstream.Msg
	attempt uint64
}

// bareClient is the bare baseline's workers: retries that are due go first.
type bareClient struct {
	bareSpec
	sink  *downstream.HTTP   // nil without a url
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

// stop ends the workers and closes the sink's connections.
func (b *bareClient) stop() {
	close(b.quit)
	b.wg.Wait()
	if b.sink != nil {
		b.sink.CloseIdle()
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
			b.settle(ctx, held{m: m})
		case <-b.quit:
			return
		}
	}
}

// settle calls h's read and acks, retries or terminates it.
func (b *bareClient) settle(ctx context.Context, h held) {
	m := h.m
	if b.sink == nil && !b.decode {
		_ = m.Ack()
		return
	}
	md, merr := m.Metadata()
	read, derr := meter.Decode(m.Data())
	if merr != nil || derr != nil {
		_ = m.Term() // never on the bench's reads
		return
	}
	var err error
	if b.sink != nil {
		err = b.sink.Deliver(ctx, read)
	}
	attempt := cmp.Or(h.attempt, md.NumDelivered)
	switch {
	case err == nil:
		_ = m.Ack()
		return
	case b.policy.MaxAttempts == 0:
		_ = m.Nak()
		return
	case b.policy.Exhausted(attempt):
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
		delay = b.policy.DelayWithFloor(attempt, b.rnd, retryAfter)
	}
	b.naks.record(md.Sequence.Stream, delay)
	if delay > b.hold {
		_ = m.NakWithDelay(delay)
		return
	}
	time.AfterFunc(delay, func() {
		select {
		case b.due <- held{m: m, attempt: attempt + 1}:
		case <-b.quit:
		}
	})
}

// seqSet is a set of stream sequences, safe for concurrent use; a nil set
// keeps none.
type seqSet struct{ m sync.Map }

func newSeqSet() *seqSet { return &seqSet{} }

func (s *seqSet) add(seq uint64) {
	if s != nil {
		s.m.Store(seq, true)
	}
}

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

// record keeps the delay asked now for the read at stream sequence seq; a
// nil capture keeps none. The time is taken here, a monotonic reading that
// compares safely with the rate engine's.
func (c *nakCapture) record(seq uint64, delay time.Duration) {
	if c == nil {
		return
	}
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
