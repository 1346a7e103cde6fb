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
	"github.com/meterline/meter-consumer/internal/budget"
	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/limit"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Options configures a Consumer. Sink, DeadLetter, Metrics and View are
// required.
type Options struct {
	Policy retry.Policy
	// Concurrency is how many reads are handled at once. Required, as are
	// AckWait, HandlerTimeout and ShutdownTimeout: their defaults are the
	// binary's (package config).
	Concurrency int
	// PullBatch is how many messages one pull asks for; it bounds the client
	// buffer (default AutoPullBatch).
	PullBatch int
	// HandlerTimeout bounds the work on one delivery: the record look-up,
	// the downstream call and the dead-letter copy; it must be shorter than
	// the consumer's AckWait.
	HandlerTimeout time.Duration
	// AckWait is the durable consumer's AckWait; in-progress signals keep
	// long work and held reads alive at half of it.
	AckWait time.Duration
	// ShutdownTimeout bounds a graceful stop.
	ShutdownTimeout time.Duration
	// SpillAfter is how long a pulled read may wait for a worker before it
	// is parked, kept alive (default AckWait/4).
	SpillAfter time.Duration
	// DeadLetterRetry drives in-process retries of a dead-letter publish
	// before the original is NAKed. Required: the binary's is package
	// config's (config.DLQ.PublishRetry).
	DeadLetterRetry retry.Policy
	// DeadLetterWindow is the dead-letter stream's duplicate window: a copy
	// first tried longer ago than that is looked for before it is made
	// again. 0 (unknown): always look.
	DeadLetterWindow time.Duration
	// Records keeps what the delivery count cannot tell about a read (its
	// hand-backs, its dead-letter decision); nil keeps nothing.
	Records Records

	// View is the engine's view every call is judged by. Required: the
	// composition root (service.Pipeline) builds it with Engine, its
	// MaxPause, its NoDips, its random source and its clock taken from
	// these options.
	View *engine.View
	// Breaker, when set, opens on a downstream that fails as a whole: the
	// consumer stops pulling and holds its reads until probes succeed.
	// Built by the composition root with Engine, which has it open
	// only while View judges the engine silent; New adds the consumer's
	// reaction to its transitions (Breaker.OnChange), and Run stops it.
	Breaker *breaker.Breaker
	// Limiter, when set, adapts the calls in flight to the downstream's
	// capacity (Concurrency stays the upper bound).
	Limiter *limit.Limiter
	// Budget, when set, bounds retries to a share of first attempts: a
	// retry over it is held, kept alive, uncharged, until it fits.
	Budget *budget.Budget
	// MaxReadAge, when set, bounds a read's age (from its stream
	// timestamp): a transient failure past it is dead-lettered with reason
	// expired instead of retried.
	MaxReadAge time.Duration

	Sink downstream.Sink
	// SinkTimeout, when set, is the bound the sink puts on each of its
	// calls itself (the HTTP sink's client timeout). No longer than
	// HandlerTimeout less SettleReserve, it spares deliver a deadline of
	// its own per call; 0: deliver bounds each call by the delivery's
	// deadline less the reserve.
	SinkTimeout time.Duration
	DeadLetter  DeadLetterer
	Metrics     *Metrics
	Logger      *slog.Logger // default: discard
	Rand        retry.Source // default: seeded from the clock
	// Clock is the process's clock: its monotonic clock measures every
	// interval (the breaker's window, the engine's view), its wall clock
	// only what is compared with a timestamp (default clock.System()).
	Clock clock.Clock
	// Conn, when set, is the connection the durable is consumed on: a
	// delivery that arrived before it was down for AckWait/4 or more is
	// dropped unsettled (see leases). nil: never dropped.
	Conn Conn
}

// Consumer pulls meter reads from a durable JetStream consumer, delivers
// each downstream and settles it: Ack, a jittered delayed NAK, or a
// dead-letter copy followed by TERM.
type Consumer struct {
	o   Options
	log *slog.Logger
	m   *Metrics
	// now is the one clock the consumer times its work by: Options.Clock's
	// monotonic clock, as a time.Time whose differences alone mean
	// something (the wall clock can step). Contexts get what is left of a
	// deadline on it as a timeout (within).
	now func() time.Time
	// Reads waiting in the process, and the one owner of keep-alives.
	keep    *keepAlive
	retries *retries
	park    *park
	// unpulled is closed once the run's stop has ended pulling: a
	// hand-back's NAK waits for it, so the read is redelivered to another
	// replica, not to this one, which would only hand it back again.
	unpulled     chan struct{}
	pullingEnded func() // closes unpulled, once

	consuming atomic.Bool
	records   Records
	naks      *nakLog
	limits    *limitLog // nil without an adaptive limit
	// sinkBounded: the sink bounds every call itself within the handler
	// timeout, so deliver need not add a timeout of its own.
	sinkBounded bool
	// The engine's view and the controls that act on it (no-ops when off).
	view    *engine.View
	breaker circuit
	limit   concurrency
	budget  retryBudget
	leases  *leases
	server  *serverClock
}

// New validates the options and builds a Consumer.
func New(o Options) (*Consumer, error) {
	// The defaults of the binary live in package config, not here.
	if o.Sink == nil || o.DeadLetter == nil || o.Metrics == nil || o.View == nil {
		return nil, errors.New("stream: Sink, DeadLetter, Metrics and View are required")
	}
	if o.Concurrency <= 0 || o.AckWait <= 0 || o.HandlerTimeout <= 0 || o.ShutdownTimeout <= 0 {
		return nil, fmt.Errorf("stream: Concurrency (%d), AckWait (%s), HandlerTimeout (%s) and ShutdownTimeout (%s) are required",
			o.Concurrency, o.AckWait, o.HandlerTimeout, o.ShutdownTimeout)
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := o.DeadLetterRetry.Validate(); err != nil {
		return nil, fmt.Errorf("stream: DeadLetterRetry is required: %w", err)
	}
	if o.HandlerTimeout >= o.AckWait {
		// The binary refuses this before (topology's check names its settings).
		return nil, fmt.Errorf("stream: HandlerTimeout (%s) must be shorter than AckWait (%s), the durable's: a handled read would be redelivered under its worker", o.HandlerTimeout, o.AckWait)
	}
	if o.PullBatch <= 0 {
		o.PullBatch = AutoPullBatch(o.Concurrency, o.HandlerTimeout, o.AckWait)
	}
	if o.SpillAfter <= 0 {
		o.SpillAfter = o.AckWait / 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(o.Clock.Now().UnixNano()))
	}
	log := o.Logger.With(slog.String("component", "stream"))
	c := &Consumer{o: o, log: log, m: o.Metrics, records: o.Records, naks: &nakLog{log: log, limit: NakLines}}
	if c.records == nil {
		c.records = noRecords{}
	}
	c.sinkBounded = o.SinkTimeout > 0 && o.SinkTimeout <= o.HandlerTimeout-SettleReserve(o.HandlerTimeout)
	c.view = o.View
	c.server = &serverClock{clk: o.Clock, log: log, set: func(d time.Duration) { c.m.serverClockOffset.Set(d.Seconds()) }}
	c.leases = newLeases(o.Clock, o.AckWait, o.Conn, log, c.m.leasesLost.Inc)
	c.now = monoTime(o.Clock)
	c.keep = newKeepAlive(o, c.now, c.settleError, func(n int) { c.m.held.Set(float64(n)) })
	c.retries = &retries{keep: c.keep, onErr: c.settleError, gate: c.retryGate}
	c.park = newPark(c.keep)
	c.unpulled = make(chan struct{})
	c.pullingEnded = sync.OnceFunc(func() { close(c.unpulled) })
	c.breaker, c.limit, c.budget = closedCircuit{}, unlimited{}, unbudgeted{}
	if o.Budget != nil {
		c.budget = o.Budget
	}
	c.m.limit.Set(float64(o.Concurrency))
	if o.Limiter != nil {
		c.limit = o.Limiter
		c.m.limit.Set(float64(o.Limiter.Limit()))
		c.limits = newLimitLog(log, o.Limiter.Limit())
		o.Limiter.OnChange(func(l int) {
			c.m.limit.Set(float64(l))
			c.limits.move(l)
		})
	}
	if o.Breaker != nil {
		c.breaker = o.Breaker
		o.Breaker.OnChange(c.breakerChanged)
	}
	return c, nil
}

// breakerChanged is the consumer's reaction to a transition of its
// breaker: the metrics, the log, and the limit's slow start once the
// engine is back.
func (c *Consumer) breakerChanged(from, to breaker.State) {
	c.m.breakerChanged(to)
	lvl := slog.LevelWarn
	if to == breaker.Closed {
		lvl = slog.LevelInfo
	}
	c.log.LogAttrs(context.Background(), lvl, "breaker", slog.String("from", from.String()), slog.String("to", to.String()))
	if to == breaker.Closed {
		// The engine is back: the limit fell on an outage, not on its
		// capacity, and what the view saw meanwhile says nothing of its
		// load.
		c.view.Back()
		c.limit.SlowStart()
		if n := c.retries.back(c.o.Policy.Base, c.o.Rand); n > 0 {
			c.m.hastened.Add(float64(n))
			c.log.LogAttrs(context.Background(), slog.LevelInfo, "held retries hastened: the rate engine is back",
				slog.Int("retries", n), slog.Duration("within", c.o.Policy.Base))
		}
	}
}

// monoTime returns c's monotonic clock as a time.Time whose differences
// alone mean something: held reads are timed by it, never by the wall
// clock, which can step.
func monoTime(c clock.Clock) func() time.Time {
	epoch := time.Unix(0, 0)
	return func() time.Time { return epoch.Add(c.Mono()) }
}

// Consuming reports whether the consumer is pulling messages.
func (c *Consumer) Consuming() bool { return c.consuming.Load() }

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

// RefillAt is how few reads may be left in the client buffer (delivered
// or still owed by the server) before the next pull request asks for the
// rest of the batch: one read per worker, never more than half the batch
// (nats.go's own default). Each worker then still has a read in hand while
// the request is on its way, which takes less than the HTTP call every
// read costs; and a refill asks for batch-concurrency reads instead of half
// the batch, so there are fewer pull requests per read for the server to
// handle (measured in docs/PERFORMANCE.md, the process scenario). The
// buffer never holds more than the batch, so AutoPullBatch's bound holds.
func RefillAt(batch, concurrency int) int {
	return max(min(concurrency, (batch+1)/2), 1)
}

// PullExpiry is how long one pull request waits on the server.
const PullExpiry = 5 * time.Second

// ErrConsumeStopped is returned by Run when JetStream ended the
// subscription on its own (for example, the durable consumer was deleted).
var ErrConsumeStopped = errors.New("consuming stopped by the server")

// Run consumes until ctx ends, then stops gracefully: it stops pulling,
// lets in-flight reads finish and settles them, up to ShutdownTimeout; past
// it, unfinished reads are handed back (recorded, uncharged) for another
// replica. Parked reads are handed back the same way; held reads go back
// with the rest of their delay. Every read stays kept alive until it is
// handed back. The caller drains the connection afterwards, which flushes
// every settlement.
func (c *Consumer) Run(ctx context.Context, cons jetstream.Consumer) error {
	life := newLifetimes(ctx)
	measure, measured := context.WithTimeout(ctx, 5*time.Second)
	c.server.measure(measure, cons) // before the first read: its age is timed on the server's clock
	measured()
	// Due retries NAKed are pulled back at once (recall): told before the
	// keep-alive owner, which NAKs them, runs.
	rc := newRecall(c.o.Concurrency, c.m.recalled)
	c.retries.naked = rc.nudge
	// The background (keep-alives, leases, the server's clock, the NAK and
	// limit logs) ends last, once every read is settled or handed back.
	background := start(ctx,
		func(ctx context.Context) { c.server.run(ctx, cons, ServerClockInterval) },
		c.leases.run,
		c.keep.run,
		func(ctx context.Context) { c.naks.run(ctx, NakInterval) },
		func(ctx context.Context) { c.limits.run(ctx, LimitLogInterval) })
	pool := c.startWorkers(life)
	p := newPuller(cons, c.dispatcher(pool, life),
		jetstream.PullMaxMessages(c.o.PullBatch),
		jetstream.PullThresholdMessages(RefillAt(c.o.PullBatch, c.o.Concurrency)),
		// Pull requests expire every 5s, with idle heartbeats every 2.5s, so
		// that a lost pull (a consumer leader failover, a reconnect) is
		// noticed in 5s instead of the default 30s.
		jetstream.PullExpiry(PullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			c.log.Warn("consume", slog.Any("error", err))
		}))
	// Following the breaker and the park (pausing and resuming the pull)
	// runs while the consumer consumes.
	following := start(ctx)
	var runErr error
	if err := p.resume(); err != nil {
		runErr = fmt.Errorf("consume: %w", err)
	} else {
		c.consuming.Store(true)
		recalled := c.dispatcher(pool, life)
		following = start(ctx, func(ctx context.Context) { c.follow(ctx, p) },
			func(ctx context.Context) { rc.run(ctx, cons, recalled, p.pulling) })
		select {
		case <-ctx.Done():
		case <-p.unexpected:
			runErr = ErrConsumeStopped
		}
		c.consuming.Store(false)
	}

	// The stop, step by step in the order it runs (a consumer that never
	// pulled runs it too: nothing is buffered, parked or held). Every
	// hand-back, its record included, ends by HandBackGrace past the stop's
	// deadline.
	stopBy := c.now().Add(c.o.ShutdownTimeout)
	over := life.countdown(c.o.ShutdownTimeout)
	// 1. Stop following the breaker and the park, and recalling retries:
	//    pulling is not resumed.
	following.stop()
	// 2. Stop pulling with Drain: buffered reads still reach dispatch,
	//    which hands each to an idle worker or parks it (it waits for no
	//    worker once the stop has begun). Once pulling has ended, the
	//    hand-backs waiting for it NAK their reads, and the parked reads
	//    are handed back: none can come back to this process.
	if !p.pause(stopBy.Sub(c.now()) + HandBackGrace) {
		c.log.Warn("shutdown: the client buffer was not drained in time; its reads come back after the ack wait")
	}
	c.pullingEnded()
	parked := c.park.release(func(d *delivery, why error) { c.handBackUnhandled(life.giveUp, d, why) })
	// 3. Let the workers finish their reads; past the stop's deadline their
	//    calls are cut and the reads handed back.
	pool.stop()
	// 4. Give the held reads back with the rest of their delay.
	held := c.retries.release()
	if held+parked > 0 {
		c.log.Info("held and parked reads handed back to the server", slog.Int("held", held), slog.Int("parked", parked))
	}
	// 5. Stop the keep-alives (nothing is left to keep alive) and the rest
	//    of the background, then the breaker's timer; the stop is over.
	background.stop()
	c.breaker.Stop()
	over()
	return runErr
}

// lifetimes are the three ends of a run, named once and handed together
// to the workers and the dispatcher:
//   - graceful, the caller's context: when it ends, the stop begins; a read
//     waiting for the breaker or the limit is handed back, a call in
//     flight goes on.
//   - hard ends when the stop has run out of time (ShutdownTimeout after it
//     began): calls still in flight are cut and their reads handed back.
//   - giveUp ends HandBackGrace after hard: a hand-back no longer waits for
//     the records bucket, so the stop ends even with it down.
type lifetimes struct {
	graceful, hard, giveUp context.Context
	endHard, endGiveUp     context.CancelFunc
}

func newLifetimes(ctx context.Context) lifetimes {
	base := context.WithoutCancel(ctx)
	hard, endHard := context.WithCancel(base)
	giveUp, endGiveUp := context.WithCancel(base)
	return lifetimes{graceful: ctx, hard: hard, giveUp: giveUp, endHard: endHard, endGiveUp: endGiveUp}
}

// countdown starts the stop's clock: hard ends in timeout, giveUp
// HandBackGrace later. over ends both at once, when the stop is over.
func (l lifetimes) countdown(timeout time.Duration) (over func()) {
	toHard := time.AfterFunc(timeout, l.endHard)
	toGiveUp := time.AfterFunc(timeout+HandBackGrace, l.endGiveUp)
	return func() {
		toHard.Stop()
		toGiveUp.Stop()
		l.endHard()
		l.endGiveUp()
	}
}

// HandBackGrace is how long the stop waits, past its deadline, for the
// client buffer to drain into the park, and for the hand-backs' records:
// the stop ends by then, whatever the records bucket does (a hand-back not
// recorded by then is NAKed unrecorded).
const HandBackGrace = 5 * time.Second

// dispatcher returns the handler of pulled messages: each goes to an idle
// worker, or is parked (kept alive from then on, taken by the next free
// worker) when the breaker is open or reads are parked already. Once the
// stop has begun, a read no idle worker takes at once is parked, to be
// handed back when pulling has ended: dispatch never waits for a worker
// then, so the drain ends at once whatever the workers wait for.
//
// While no worker is idle, dispatch blocks, and the reads behind it wait
// in the client buffer where nothing keeps them alive. They all arrived
// after dispatch last returned at once, so once dispatch has been blocked
// for SpillAfter in a row, the read at hand is parked, and with it every
// read behind (the park is not empty): no read waits in the client buffer
// much longer than SpillAfter, whatever the workers wait for (the breaker,
// the concurrency limit, a slow downstream). follow stops pulling while
// the park is full.
func (c *Consumer) dispatcher(pool *workers, life lifetimes) jetstream.MessageHandler {
	var blockedSince time.Time // zero while dispatch keeps returning at once
	spill := time.NewTimer(time.Hour)
	spill.Stop()
	return func(msg jetstream.Msg) {
		d := newDelivery(msg, c.leases)
		for {
			changed := c.breaker.Changed() // before the check, so no transition is missed
			if c.paused() || c.park.len() > 0 {
				c.park.add(d)
				blockedSince = time.Time{}
				return
			}
			select {
			case pool.work <- d: // an idle worker: no timer on the fast path
				blockedSince = time.Time{}
				return
			default:
			}
			if life.graceful.Err() != nil { // the stop has begun: no waiting for a worker
				c.park.add(d)
				return
			}
			now := c.now()
			if blockedSince.IsZero() {
				blockedSince = now
			}
			left := c.o.SpillAfter - now.Sub(blockedSince)
			if left <= 0 {
				c.park.add(d)
				blockedSince = time.Time{}
				return
			}
			spill.Reset(left)
			select {
			case pool.work <- d:
				spill.Stop()
				return
			case <-spill.C:
				c.park.add(d)
				blockedSince = time.Time{}
				return
			case <-life.graceful.Done():
				spill.Stop()
				c.park.add(d)
				return
			case <-changed:
				spill.Stop()
			}
		}
	}
}

func (c *Consumer) settleError(op string, err error) {
	if err == nil || errors.Is(err, errLeaseLost) { // counted and logged once, by the delivery
		return
	}
	c.m.settleErrors.WithLabelValues(op).Inc()
	c.log.Error("settle", slog.String("op", op), slog.Any("error", err))
}
