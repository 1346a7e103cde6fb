package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/retry"
)

// DeadLetterer stores the dead-letter copy of a read; nil error means
// JetStream confirmed it. *dlq.Publisher is the production implementation.
type DeadLetterer interface {
	Publish(ctx context.Context, e dlq.Entry) error
}

// Options configures a Consumer. Sink, DeadLetter and Metrics are required.
type Options struct {
	Policy retry.Policy
	// Concurrency is how many reads are handled at once (default 32).
	Concurrency int
	// PullBatch is how many messages one pull asks for; it bounds the client
	// buffer (default AutoPullBatch).
	PullBatch int
	// HandlerTimeout bounds the delivery of one read (default 10s); it must
	// be shorter than the consumer's AckWait.
	HandlerTimeout time.Duration
	// AckWait is the durable consumer's AckWait; in-progress signals keep
	// long work and held reads alive at half of it (default 30s).
	AckWait time.Duration
	// ShutdownTimeout bounds a graceful stop (default 30s).
	ShutdownTimeout time.Duration
	// DeadLetterRetry drives in-process retries of a dead-letter publish
	// before the original is NAKed (default 3 attempts, 100ms base, 1s cap).
	DeadLetterRetry retry.Policy

	// Breaker, when set, opens on a downstream that fails as a whole: the
	// consumer stops pulling and holds its reads until probes succeed.
	Breaker *breaker.Options

	// ServerSideDelay NAKs failed reads with NakWithDelay at once instead of
	// holding them in the process. It exists to measure the difference (see
	// delayer); a production consumer leaves it false.
	ServerSideDelay bool

	Sink       downstream.Sink
	DeadLetter DeadLetterer
	Metrics    *Metrics
	Logger     *slog.Logger     // default: discard
	Rand       retry.Source     // default: seeded from the clock
	Now        func() time.Time // default: time.Now
}

// Consumer pulls meter reads from a durable JetStream consumer, delivers
// each downstream and settles it: Ack, a jittered delayed NAK, or a
// dead-letter copy followed by TERM.
type Consumer struct {
	o       Options
	log     *slog.Logger
	m       *Metrics
	delayer *delayer

	consuming atomic.Bool
	unstored  unstoredCopies
	// sinkBounded: the sink bounds every call itself within the handler
	// timeout, so deliver need not add a timeout of its own.
	sinkBounded bool
	keepers     *keepers
	breaker     *breaker.Breaker // nil: no breaker
}

// New validates the options and builds a Consumer.
func New(o Options) (*Consumer, error) {
	if o.Sink == nil || o.DeadLetter == nil || o.Metrics == nil {
		return nil, errors.New("stream: Sink, DeadLetter and Metrics are required")
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}

	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.HandlerTimeout <= 0 {
		o.HandlerTimeout = min(10*time.Second, o.AckWait/2)
	}
	if o.HandlerTimeout >= o.AckWait {
		return nil, fmt.Errorf("stream: handler timeout (%s) must be shorter than ack wait (%s)", o.HandlerTimeout, o.AckWait)
	}
	if o.PullBatch <= 0 {
		o.PullBatch = AutoPullBatch(o.Concurrency, o.HandlerTimeout, o.AckWait)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.DeadLetterRetry == (retry.Policy{}) {
		o.DeadLetterRetry = retry.Policy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 3}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(time.Now().UnixNano()))
	}
	c := &Consumer{o: o, log: o.Logger, m: o.Metrics}
	if b, ok := o.Sink.(interface{ Timeout() time.Duration }); ok && b.Timeout() > 0 && b.Timeout() <= o.HandlerTimeout {
		c.sinkBounded = true
	}
	c.keepers = c.newKeepers(o.Concurrency)
	c.delayer = newDelayer(o.AckWait/2, o.Now, c.settleError, func(n int) { c.m.held.Set(float64(n)) })
	if o.Breaker != nil {
		bo := *o.Breaker
		if bo.Rand == nil {
			bo.Rand = o.Rand
		}
		next := bo.OnChange
		bo.OnChange = func(from, to breaker.State) {
			c.m.breakerChanged(to)
			lvl := slog.LevelWarn
			if to == breaker.Closed {
				lvl = slog.LevelInfo
			}
			c.log.LogAttrs(context.Background(), lvl, "breaker", slog.String("from", from.String()), slog.String("to", to.String()))
			if next != nil {
				next(from, to)
			}
		}
		b, err := breaker.New(bo)
		if err != nil {
			return nil, err
		}
		c.breaker = b
	}
	return c, nil
}

// Consuming reports whether the consumer is pulling messages.
func (c *Consumer) Consuming() bool { return c.consuming.Load() }

// Held reports how many NAKed reads wait out their retry delay in this process.
func (c *Consumer) Held() int { return c.delayer.size() }

// AutoPullBatch is the default pull size: four reads per worker, which
// amortises pull requests and lets acks share writes (measured in
// docs/PERFORMANCE.md), but never so many that a buffered read could wait
// out the ack wait: a read waits for at most ceil(batch/concurrency)
// handler timeouts before a worker takes it, and that must stay below the
// ack wait.
func AutoPullBatch(concurrency int, handlerTimeout, ackWait time.Duration) int {
	rounds := 4
	if handlerTimeout > 0 {
		rounds = min(rounds, int((ackWait-1)/handlerTimeout))
	}
	return max(rounds, 1) * max(concurrency, 1)
}

// PullExpiry is how long one pull request waits on the server.
const PullExpiry = 5 * time.Second

// ErrConsumeStopped is returned by Run when JetStream ended the
// subscription on its own (for example, the durable consumer was deleted).
var ErrConsumeStopped = errors.New("consuming stopped by the server")

// Run consumes until ctx ends, then shuts down gracefully: it stops pulling,
// lets in-flight reads finish and settles them, up to ShutdownTimeout; past
// it, unfinished reads are NAKed for another replica. Held reads go back to
// the server with the rest of their delay. The caller drains the connection
// afterwards, which flushes every settlement.
func (c *Consumer) Run(ctx context.Context, cons jetstream.Consumer) error {
	// hard is cancelled only when a graceful stop runs out of time.
	hard, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()

	bg, bgStop := context.WithCancel(context.WithoutCancel(ctx))
	var bgDone sync.WaitGroup
	bgDone.Add(1)
	go func() {
		defer bgDone.Done()
		c.delayer.run(bg)
	}()

	work := make(chan jetstream.Msg)
	unparked := make(chan struct{})
	quit := make(chan struct{})
	var workers sync.WaitGroup
	// Keep-alives run until the last worker is done, past the other
	// background loops.
	keepCtx, keepStop := context.WithCancel(context.WithoutCancel(ctx))
	keepDone := make(chan struct{})
	go func() {
		defer close(keepDone)
		c.keepers.run(keepCtx)
	}()
	defer func() {
		keepStop()
		<-keepDone
	}()
	for _, s := range c.keepers.slots {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case msg := <-work:
					c.handle(ctx, hard, msg, s)
				case <-unparked:
					if msg, ok := c.delayer.takeParked(); ok {
						c.handle(ctx, hard, msg, s)
					}
				case <-quit:
					return
				}
			}
		}()
	}
	dispatch := func(msg jetstream.Msg) {
		for {
			changed := c.breakerChanged() // before the check, so no transition is missed
			if c.paused() {
				c.delayer.park(msg) // kept alive until the breaker lets reads through
				return
			}
			select {
			case work <- msg:
				return
			case <-hard.Done():
				c.settleError("nak", msg.Nak())
				return
			case <-changed:
			}
		}
	}
	p := newPuller(cons, dispatch,
		jetstream.PullMaxMessages(c.o.PullBatch),
		// Pull requests expire every 5s, with idle heartbeats every 2.5s, so
		// that a lost pull (a consumer leader failover, a reconnect) is
		// noticed in 5s instead of the default 30s.
		jetstream.PullExpiry(PullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			c.log.Warn("consume", slog.Any("error", err))
		}))
	if err := p.resume(); err != nil {
		close(quit)
		workers.Wait()
		bgStop()
		bgDone.Wait()
		return fmt.Errorf("consume: %w", err)
	}
	c.consuming.Store(true)
	if c.breaker != nil {
		bgDone.Add(1)
		go func() {
			defer bgDone.Done()
			c.followBreaker(bg, p, unparked)
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case <-p.unexpected:
		runErr = ErrConsumeStopped
	}
	c.consuming.Store(false)

	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.ShutdownTimeout)
	defer stopCancel()
	stopAfter := context.AfterFunc(stopCtx, hardStop)
	defer stopAfter()

	bgStop() // no more pausing or resuming; the delayer stops too
	bgDone.Wait()
	if !p.pause(time.Until(deadline(stopCtx))) {
		c.log.Warn("shutdown timeout: unhandled buffered reads are NAKed")
	}
	close(quit)
	workers.Wait()
	if n := c.delayer.release(); n > 0 {
		c.log.Info("held reads handed back to the server with the rest of their delay", slog.Int("reads", n))
	}
	return runErr
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func (c *Consumer) settleError(op string, err error) {
	if err == nil {
		return
	}
	c.m.settleErrors.WithLabelValues(op).Inc()
	c.log.Error("settle", slog.String("op", op), slog.Any("error", err))
}
