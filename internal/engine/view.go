package engine

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Answer is what the engine did with one call.
type Answer int

const (
	// Served: a 2xx. Its latency is a sample.
	Served Answer = iota
	// Refused: a permanent answer (400, 422): the engine served the call
	// and found the read at fault. Its latency is a sample.
	Refused
	// Shed: a 503 or 429, a timeout, an engine that could not be reached
	// (a refused or reset connection, a 502 or 504): a sign of overload when
	// it is broad.
	Shed
	// Failed: another transient failure (a 500, a redirect, a panic of
	// ours): the read's own, no sign of load.
	Failed
	// Cut: no answer, the stop cut the call short: nothing is learnt.
	Cut
)

// Call is one call's outcome, in context.
type Call struct {
	// Read tells distinct reads apart (the stream sequence).
	Read uint64
	// Failures is how often the read failed before this call: 0 for a
	// fresh read, a first attempt.
	Failures   uint64
	Answer     Answer
	Latency    time.Duration
	RetryAfter time.Duration // what the engine asked for, 0 if it did not
	// Quota: the shed was a 429, a quota of the caller (an account over
	// its rate): never taken for a fast load shed, however fast.
	Quota bool
}

// Feedback is what one call means for the replica.
type Feedback struct {
	// Queued: the call closed a latency round that confirms a queue; the
	// limit comes down a little, once per round.
	Queued bool
	// Hold: the latency rises (three rounds in a row, however short); the
	// limit must not grow.
	Hold bool
	// Overloaded is the verdict after the call.
	Overloaded bool
	// Pause, when positive, is how long the whole replica should wait: the
	// engine throttles broadly.
	Pause time.Duration
	// ShedShare, Latency and Baseline are the View's state after the call,
	// as Snapshot has them.
	ShedShare         float64
	Latency, Baseline time.Duration
}

// Options configures a View. The zero value takes every default.
type Options struct {
	Window        time.Duration // of the shed shares and of throttling (default 2s)
	MinWeight     float64       // weight of calls in Window before a share counts (default 10: ten first attempts)
	ShedShare     float64       // shed share past which, beyond chance, a shed is the engine's, not the read's (default 0.3)
	OverloadShare float64       // shed share past which the engine is overloaded (default 0.5)
	ServingShare  float64       // answered share at which a shed is no outage (default 0.1)
	// FastShare is the share of calls shed fast (answered in under half the
	// latency baseline, beyond the share of answered calls that quick:
	// refused before any work was done, as a load shedder does) past which
	// the engine is overloaded (default 0.05).
	FastShare float64

	Tolerance      float64       // a round's median over the baseline that is a queue (default 1.5)
	MinRise        time.Duration // and by at least this much (default 2ms)
	MinSamples     int           // latency samples of a round (default 48)
	BaselineWindow time.Duration // the baseline's time constant going up (default 10s)
	// QueueFor is how long queued rounds must last, three or more in a row,
	// before they are a queue (default 500ms): the process's own pauses (a GC,
	// a busy CPU) lift a few rounds, an engine's queue lasts.
	QueueFor time.Duration

	ThrottleReads int // distinct reads with Retry-After in Window for a pause (default 3)
	// ThrottleShare is the share of the calls' weight over Window shed with
	// a Retry-After, beside ThrottleReads, for a pause (default 0.03): an
	// engine that adds Retry-After to a few of its sheds throttles single
	// reads, not the replica (the bench's capacity engine, Retry-After on a
	// fifth of its sheds, paused one replica into 0.52 of its capacity).
	ThrottleShare float64
	MaxPause      time.Duration // bound of a pause (retry.max_server_wait); 0: never pause

	Rand  retry.Source // jitter of pauses (default: seeded from the clock)
	Clock clock.Clock  // its monotonic clock times every window (default clock.System())
}

func (o *Options) defaults() error {
	if o.Window <= 0 {
		o.Window = 2 * time.Second
	}
	if o.MinWeight <= 0 {
		o.MinWeight = 10
	}
	if o.ShedShare == 0 {
		o.ShedShare = 0.3
	}
	if o.OverloadShare == 0 {
		o.OverloadShare = 0.5
	}
	if o.ServingShare == 0 {
		o.ServingShare = 0.1
	}
	if o.FastShare == 0 {
		o.FastShare = 0.05
	}
	if o.Tolerance == 0 {
		o.Tolerance = 1.5
	}
	if o.MinRise == 0 {
		o.MinRise = 2 * time.Millisecond
	}
	if o.MinSamples <= 0 {
		o.MinSamples = 48
	}
	if o.BaselineWindow <= 0 {
		o.BaselineWindow = 10 * time.Second
	}
	if o.QueueFor <= 0 {
		o.QueueFor = 500 * time.Millisecond
	}
	if o.ThrottleReads <= 0 {
		o.ThrottleReads = 3
	}
	if o.ThrottleShare == 0 {
		o.ThrottleShare = 0.03
	}
	switch {
	case o.ShedShare <= 0 || o.ShedShare > 1 || o.OverloadShare < o.ShedShare || o.OverloadShare > 1:
		return fmt.Errorf("engine: shed share (%v) and overload share (%v) must satisfy 0 < shed <= overload <= 1", o.ShedShare, o.OverloadShare)
	case o.ThrottleShare < 0 || o.ThrottleShare > 1:
		return fmt.Errorf("engine: throttle share (%v) must be in [0, 1]", o.ThrottleShare)
	case o.FastShare < 0 || o.FastShare > 1:
		return fmt.Errorf("engine: fast share (%v) must be in [0, 1]", o.FastShare)
	case o.Tolerance <= 1:
		return fmt.Errorf("engine: tolerance (%v) must be > 1", o.Tolerance)
	case o.MaxPause < 0:
		return fmt.Errorf("engine: max pause (%s) must be >= 0", o.MaxPause)
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(time.Now().UnixNano()))
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	return nil
}

// View is the replica's view of the engine. Build it with New.
type View struct {
	o Options

	mu       sync.Mutex
	shares   shares
	quick    share         // of the answered calls answered quickly
	answered time.Duration // when a call was last answered (monotonic; 0: never)
	quiet    [2]quietFail  // the last two reads whose first attempt failed in a quiet
	latency  rounds
	throttle throttle
}

// New builds a View.
func New(o Options) (*View, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &View{o: o, shares: shares{window: o.Window},
		latency:  rounds{min: o.MinSamples, window: o.BaselineWindow, tolerance: o.Tolerance, rise: o.MinRise, span: o.QueueFor},
		throttle: throttle{window: o.Window, reads: o.ThrottleReads}}, nil
}

// share is a running share of a yes/no over the last calls (about 256).
type share struct {
	p float64
	n int
}

func (s *share) add(yes bool) {
	s.n = min(s.n+1, 256)
	x := 0.0
	if yes {
		x = 1
	}
	s.p += (x - s.p) / float64(s.n)
}

// quietFail is a read whose first attempt failed after the engine had
// answered no one for a while (its quiet).
type quietFail struct {
	read uint64
	at   time.Duration // monotonic; 0: none
}

// weight is what a call of a read that failed f times before counts for.
func weight(f uint64) float64 {
	return 1 / float64(uint64(1)<<min(f, 30))
}

// Observe learns from one call and says what it means.
func (v *View) Observe(c Call) Feedback {
	if c.Answer == Cut {
		return Feedback{Overloaded: v.Overloaded()}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	quick := v.latency.baseline > 0 && c.Latency < v.latency.baseline/2
	served := c.Answer == Served || c.Answer == Refused
	if served {
		v.quick.add(quick)
		v.answered = now
	}
	if c.Failures == 0 && (c.Answer == Shed || c.Answer == Failed) && (v.answered == 0 || now-v.answered >= v.quietFor()) {
		if v.quiet[0].read != c.Read {
			v.quiet[1] = v.quiet[0]
		}
		v.quiet[0] = quietFail{read: c.Read, at: max(now, 1)}
	}
	v.shares.add(now, call{w: weight(c.Failures), shed: c.Answer == Shed, quick: quick && !c.Quota, served: served,
		retryAfter: c.RetryAfter > 0})
	var fb Feedback
	if c.Answer == Served || c.Answer == Refused {
		fb.Queued = v.latency.add(now, c.Latency)
	}
	fb.Hold = v.latency.rising()
	raw, fast, ok, retries := v.shares.share(now, v.o.MinWeight, v.quick.p) // once per call: it sums the window
	fb.ShedShare = raw
	fb.Overloaded = v.shedsOverload(loadsOf(raw, fast, ok, retries)) || v.queued(now)
	fb.Latency, fb.Baseline = v.latency.last, v.latency.baseline
	if c.Answer == Shed && c.RetryAfter > 0 && v.o.MaxPause > 0 {
		wait := v.throttle.add(now, c.Read, min(c.RetryAfter, v.o.MaxPause))
		share, ok := v.shares.throttled(now, v.o.MinWeight)
		if wait > 0 && fb.Overloaded && ok && share >= v.o.ThrottleShare && now >= v.throttle.until {
			fb.Pause = min(wait+time.Duration(v.o.Rand.Int64N(int64(wait/2)+1)), v.o.MaxPause)
			v.throttle.until = now + fb.Pause
		}
	}
	return fb
}

// loads is the shed and fast-shed shares over Window. Where retries are
// most of the weight, only fast sheds count: retries are the reads chosen
// by their own failures (at the end of a backlog the reads that always
// fail are all that is left), and only a refusal before any work says
// that the engine, not the read, turned them away. Locked.
func (v *View) loads(now time.Duration) (shed, fast float64, ok bool) {
	return loadsOf(v.shares.share(now, v.o.MinWeight, v.quick.p))
}

// loadsOf is loads from the window's shares.
func loadsOf(shed, fast float64, ok, retries bool) (float64, float64, bool) {
	if retries {
		shed = fast
	}
	return shed, fast, ok
}

// overloaded is the verdict at now. Locked.
func (v *View) overloaded(now time.Duration) bool {
	return v.shedsOverload(v.loads(now)) || v.queued(now)
}

// shedsOverload is the part of the verdict the loads give: at least
// OverloadShare shed, or FastShare shed fast.
func (v *View) shedsOverload(shed, fast float64, ok bool) bool {
	return ok && (shed >= v.o.OverloadShare || fast >= v.o.FastShare)
}

// queued reports a queue in the latency that is still the engine's: it
// stands only while the engine answers, a call answered within four
// baselines (100ms at least) or two of the last round's medians. Rounds
// close on answered calls only, so without this an engine that stopped
// answering (the end of a backlog, where only the reads that always fail
// are left) would be judged on the last queue it showed, however old, and
// every read's own failure would be taken for its load. Locked.
func (v *View) queued(now time.Duration) bool {
	fresh := max(v.quietFor(), 2*v.latency.last)
	return v.latency.queued(now) && v.answered != 0 && now-v.answered <= fresh
}

// Overloaded reports whether the engine is overloaded: at least
// OverloadShare of the calls' weight shed over Window, or FastShare shed
// fast (only fast sheds count where retries are most of the weight); or
// its latency shows a queue.
func (v *View) Overloaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.overloaded(v.o.Clock.Mono())
}

// Shedding reports whether the engine sheds broadly, so that a shed says
// nothing about its read: at least ShedShare of the calls' weight shed over
// Window beyond chance (only fast sheds count where retries are most of the
// weight), or the engine overloaded.
//
// Beyond chance: the share less two standard deviations of a share drawn
// from as much weight. Where a fifth of the reads fail on their own, the
// first dozen calls answered (the weight just past MinWeight, as a run
// starts) are a third sheds often enough, the more so as a 503 is answered
// sooner than a 200 of an engine whose latency spreads: the bench's long
// tail credited 1 and 3 such sheds in two runs, each a read's own failure taken
// for the engine's. A broad shed of many calls is past the margin at once.
func (v *View) Shedding() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	shed, fast, ok, retries := v.shares.share(now, v.o.MinWeight, v.quick.p)
	if !retries { // among retries the fast share decides, chance taken out already
		shed = beyondChance(shed, v.shares.weight(now))
	}
	shed, _, ok = loadsOf(shed, fast, ok, retries)
	return (ok && shed >= v.o.ShedShare) || v.overloaded(now)
}

// beyondChance is share less two standard deviations of a share of weight
// w. The calls weigh at most 1 each, so share*(1-share)/w bounds the
// variance of their weighted share from above.
func beyondChance(share, w float64) float64 {
	if w <= 0 {
		return 0
	}
	return share - 2*math.Sqrt(share*(1-share)/w)
}

// Serving reports whether the engine answers others while it sheds: at
// least ServingShare of the calls' weight over Window was answered (2xx, or
// a permanent answer), and a call was answered within the last four latency
// baselines (at least 100ms), so that an engine that has just gone down is
// not taken for serving on the strength of its last seconds. A shed then is
// its load, or the read's own, never an outage: the breaker is for an
// engine that serves no one.
func (v *View) Serving() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	if v.answered == 0 || now-v.answered > max(4*v.latency.baseline, 100*time.Millisecond) {
		return false
	}
	share, ok := v.shares.served(now, v.o.MinWeight)
	return ok && share >= v.o.ServingShare
}

// quietFor is how long the engine must have answered no one before a
// fresh read's failure says it is down: four latency baselines, at least
// 100ms. Locked.
func (v *View) quietFor() time.Duration {
	return max(4*v.latency.baseline, 100*time.Millisecond)
}

// Down reports whether, as far as read r can tell, the engine serves no
// one: another read's first attempt failed within Window, after the engine
// had answered no one for four latency baselines (100ms at least), and
// nothing was answered since. A read whose last attempt fails then cannot
// be told from the outage (an engine down from the start, before the
// breaker has seen enough fresh reads to open): its failure is not its own.
// A read that fails alone, or while others are answered, is not helped.
func (v *View) Down(r uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	for _, q := range v.quiet {
		if q.at != 0 && q.read != r && q.at > v.answered && now-q.at <= v.o.Window {
			return true
		}
	}
	return false
}

// Snapshot is the View's state, for metrics and logs.
type Snapshot struct {
	ShedShare  float64       // over Window (0 with too little weight)
	Latency    time.Duration // median of the last round
	Baseline   time.Duration
	Queued     bool
	Overloaded bool
}

// Snapshot returns the View's state now.
func (v *View) Snapshot() Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	share, _, _, _ := v.shares.share(now, v.o.MinWeight, v.quick.p)
	return Snapshot{ShedShare: share, Latency: v.latency.last, Baseline: v.latency.baseline,
		Queued: v.queued(now), Overloaded: v.overloaded(now)}
}
