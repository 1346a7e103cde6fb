package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
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
	// (a refused or reset connection, a 502 or 504): a refusal that may be
	// the engine's load, or the read's own.
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
	// Low: the call was sent during a dip (Feedback.Dip), the replica
	// holding its calls in flight at half its limit. InFlight is how many
	// calls the replica had in flight once it was sent, its own included
	// (0: not known).
	Low      bool
	InFlight int
}

// Dip asks the replica to hold its calls in flight at half its limit for
// For, In from now; the calls sent meanwhile are reported Low.
type Dip struct {
	In, For time.Duration
}

// Feedback is what one call means for the replica.
type Feedback struct {
	// Queued: the call closed a latency round that confirms a queue; the
	// limit comes down a little, once per round.
	Queued bool
	// Hold: the latency rises (three rounds in a row, however short); the
	// limit must not grow.
	Hold bool
	// Decrease: the call was shed by an overloaded engine: the limit comes
	// down. Pace: and a verdict of load stands: the fleet's own load
	// overloads the engine, and the call's slot is kept for a round trip.
	Decrease, Pace bool
	// Dip, when For is positive, is a dip of a trial to carry out.
	// EndDip: the trial that asked for the dip under way or pending was
	// decided: end it now.
	Dip    Dip
	EndDip bool
	// Trying: a trial started with this call, or the limit comes down on
	// it with no verdict (the engine refusing most): mark the limit.
	// Restore: set it back to the mark, the trial having found the sheds
	// the reads' own, or the check of that decrease having found it taken
	// on the order the calls were answered in (checkProvisional).
	Trying, Restore bool
	// Judged, when not Undecided, is the verdict this call's evidence
	// reached.
	Judged Judgement
	// Overloaded is the verdict after the call.
	Overloaded bool
	// Pause, when positive, is how long the whole replica should wait: the
	// engine refuses most calls and asks to be left alone.
	Pause time.Duration
	// ShedShare, Latency and Baseline are the View's state after the call,
	// as Snapshot has them.
	ShedShare         float64
	Latency, Baseline time.Duration
}

// Options configures a View. The zero value takes every default.
type Options struct {
	// Calls is how many first attempts the shares are judged over (default
	// 128); MaxAge forgets older ones (default 1m); MinCalls is the least
	// that says anything (default 10).
	Calls    int
	MaxAge   time.Duration
	MinCalls int
	// OverloadShare is the shed share, beyond chance, past which the engine
	// refuses most of what it is sent (default 0.5): the replica pauses when
	// asked to (Retry-After), and, until a trial finds the sheds the reads'
	// own, the engine is overloaded.
	OverloadShare float64

	// Dips: while a trial runs, dips start on wall-clock multiples of
	// DipEvery (default 250ms) and last DipFor (default 50ms), or two
	// latency baselines, or the time 15 first attempts take at the rate
	// the replica calls, if longer (at most 0.4 DipEvery); a trial that has not decided after
	// MaxDips (default 16) starts again. Confidence is the odds a trial
	// decides at (default 19). A verdict stands for Standing (default 30s),
	// then is tried again if the sheds go on. NoDips: the replica cannot
	// dip (no adaptive limit): no trial runs.
	DipEvery, DipFor time.Duration
	MaxDips          int
	Confidence       float64
	Standing         time.Duration
	NoDips           bool

	// Quiet is how long the engine must have failed calls without
	// answering any before it is judged to serve no one (default 250ms, or
	// four latency baselines, or 9.2 gaps between its last answers, if
	// longer).
	Quiet time.Duration

	Tolerance      float64       // a round's median over the baseline that is a queue (default 1.5)
	MinRise        time.Duration // and by at least this much (default 2ms)
	MinSamples     int           // latency samples of a round (default 48)
	BaselineWindow time.Duration // the baseline's time constant going up (default 10s)
	// QueueFor is how long queued rounds must last, three or more in a row,
	// before they are a queue (default 500ms): the process's own pauses (a GC,
	// a busy CPU) lift a few rounds, an engine's queue lasts.
	QueueFor time.Duration

	MaxPause time.Duration // bound of a pause (retry.max_server_wait); 0: never pause

	Rand  retry.Source // jitter of pauses (nil, in tests: seeded from the clock; the binary passes service.Deps.Rand, as stream.Engine does)
	Clock clock.Clock  // its monotonic clock times every window, its wall clock the dips (default clock.System())
}

func (o *Options) defaults() error {
	if o.Calls <= 0 {
		o.Calls = 128
	}
	if o.MaxAge <= 0 {
		o.MaxAge = time.Minute
	}
	if o.MinCalls <= 0 {
		o.MinCalls = 10
	}
	if o.OverloadShare == 0 {
		o.OverloadShare = 0.5
	}
	if o.DipEvery <= 0 {
		o.DipEvery = 250 * time.Millisecond
	}
	if o.DipFor <= 0 {
		o.DipFor = 50 * time.Millisecond
	}
	if o.MaxDips <= 0 {
		o.MaxDips = 16
	}
	if o.Confidence == 0 {
		o.Confidence = 19
	}
	if o.Standing <= 0 {
		o.Standing = 30 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 250 * time.Millisecond
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
	switch {
	case o.OverloadShare <= 0 || o.OverloadShare > 1:
		return fmt.Errorf("engine: overload share (%v) must be in (0, 1]", o.OverloadShare)
	case o.Confidence <= 1:
		return fmt.Errorf("engine: confidence (%v) must be > 1", o.Confidence)
	case o.MinCalls > o.Calls:
		return fmt.Errorf("engine: min calls (%d) must be <= calls (%d)", o.MinCalls, o.Calls)
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

	mu      sync.Mutex
	pending pending // calls answered, not yet counted
	fresh   fresh
	trial   trial
	verdict verdict
	silence silence
	latency rounds
	retry   retryAfters
	shed    time.Duration // when a call was last shed (monotonic; 0: never)
	// refusing is since when the engine has refused most of what it is
	// sent, without a break (monotonic; 0: it does not).
	refusing time.Duration
	// retrying: a verdict of load was belied, and is being tried again
	// from the limit it was found at (Feedback.Restore, not Trying).
	retrying bool
	// provisional is the decrease last taken on the engine refusing most
	// with no verdict of load, to check (checkProvisional).
	provisional provisional
	undo        bool // the check found the decrease to undo (Feedback.Restore)
}

// provisional is a decrease to check: taken at at (monotonic; 0: none),
// on the first attempts sent from from on (probe, gathered as they are
// answered), and set against those sent from at until until (after),
// which moves on by span while after is too thin to check.
type provisional struct {
	from, at, until, span time.Duration
	probe, after          []sentCall
}

// verdict is the last judgement a trial reached.
type verdict struct {
	is         Judgement
	at         time.Duration // monotonic
	background float64       // Own: the first attempts' share shed that is the reads' own
	// Own: the retries' share shed that is the reads' own.
	retryBackground float64
	// Load: the first attempts' share shed outside the trial's dips (that
	// of every counted call, on fewer than MinCalls first attempts), and
	// the calls the replica had in flight then, on average; the calls sent
	// since at 0.6 of that or less, retries too, and how many of them were
	// shed (belied).
	share, flight float64
	// strong: found where the replica's dips could send less (minHalved
	// calls in flight or more outside them), or where its fleet's dips
	// emptied the sheds (none of the dips' counted calls shed): a verdict
	// that says the fleet's load overruns the engine, not only that the
	// replica's own calls fare better when it sends fewer.
	strong       bool
	low, lowShed int
	retried      bool // belied once and tried again: it stands
}

// New builds a View.
func New(o Options) (*View, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &View{o: o, fresh: newFresh(o.Calls, o.MaxAge),
		latency: rounds{min: o.MinSamples, window: o.BaselineWindow, tolerance: o.Tolerance, rise: o.MinRise, span: o.QueueFor}}, nil
}

// Observe learns from one call and says what it means.
func (v *View) Observe(c Call) Feedback {
	if c.Answer == Cut {
		return Feedback{Overloaded: v.Overloaded()}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	shed, failed := c.Answer == Shed, c.Answer == Shed || c.Answer == Failed
	var fb Feedback
	if shed {
		v.shed = max(now, 1)
	}
	trying := v.trial.on
	fb.Judged = v.commit(now)
	if pv := &v.provisional; pv.at != 0 {
		sent := now - c.Latency
		switch k := (sentCall{sent: sent, shed: shed, inFlight: c.InFlight}); {
		case c.Failures != 0:
		case sent >= pv.from && sent < pv.at:
			pv.probe = append(pv.probe, k)
		case sent >= pv.at && sent < pv.until:
			pv.after = append(pv.after, k)
		}
		switch {
		case now-pv.until < 2*v.latency.high: // the calls sent before until have not all had the time to be answered
		case len(pv.after) < v.o.MinCalls && pv.until-pv.at < provisionalSpans*pv.span:
			pv.until += pv.span // too few sent since to tell: wait for more
		default:
			v.undo = v.checkProvisional()
		}
	}
	fb.Trying = !trying && v.trial.on && !v.retrying
	fb.Restore = fb.Judged == Own || v.retrying || v.undo
	if fb.Judged == Own && now < v.trial.dipEnd {
		// The trial is decided: the dip it asked for, pending or begun,
		// has nothing left to show, and held the replica at half its
		// limit for it.
		v.trial.dipEnd, fb.EndDip = now, true
	}
	v.retrying, v.undo = false, false
	if c.Answer == Served || c.Answer == Refused {
		v.silence.answer(now, v.freshFailShare(now))
		fb.Queued = v.latency.add(now, c.Latency)
		if c.Low {
			v.latency.dipped(c.Latency)
		}
	} else {
		v.silence.fail(now, now-c.Latency, c.Read, c.Failures == 0)
	}
	if c.Failures == 0 {
		v.fresh.add(now, now-c.Latency, shed, failed, c.InFlight)
	}
	v.pending.add(first{sent: now - c.Latency, fresh: c.Failures == 0, shed: shed, failed: failed, low: c.Low, inFlight: c.InFlight})
	fb.Dip = v.dip(now)
	fb.Hold = v.latency.rising()
	n, s := v.fresh.counts(now)
	if n > 0 {
		fb.ShedShare = float64(s) / float64(n)
	}
	fb.Overloaded = v.overloaded(now)
	fb.Decrease = shed && v.shedding(now)
	fb.Pace = fb.Decrease && v.paced(now)
	if fb.Decrease && v.verdict.is != Load && v.provisional.at == 0 && !v.o.NoDips {
		span := max(2*v.latency.high, provisionalSpan)
		v.provisional = provisional{at: max(now, 1), from: now - span, until: now + span, span: span,
			probe: v.provisional.probe[:0], after: v.provisional.after[:0]}
		v.fresh.since(v.provisional.from, func(c sentCall) { v.provisional.probe = append(v.provisional.probe, c) })
		fb.Trying = true // mark the limit: the check may set it back
	}
	fb.Latency, fb.Baseline = v.latency.last, v.latency.baseline
	refusing := v.refusesMost(now)
	switch {
	case !refusing:
		v.refusing = 0
	case v.refusing == 0:
		v.refusing = max(now, 1)
	}
	if shed && c.RetryAfter > 0 && v.o.MaxPause > 0 {
		wait := v.retry.add(now, min(c.RetryAfter, v.o.MaxPause), v.o.Quiet)
		if refusing && now-v.refusing >= refuseFor && (v.o.NoDips || c.InFlight <= 1) && now >= v.retry.until {
			fb.Pause = min(wait+time.Duration(v.o.Rand.Int64N(int64(wait/2)+1)), v.o.MaxPause)
			v.retry.until = now + fb.Pause
			// What it refused before the pause says nothing of after it, and
			// the pause is the replica's own quiet, not the engine's silence.
			v.fresh.reset()
			v.silence.failing, v.silence.failed = 0, 0
			v.refusing = 0
		}
	}
	return fb
}

// commit counts the calls sent longer than the horizon ago into the trial
// (and starts one when the sheds are suspect), and returns the verdict it
// reached, if any. A call counts only once those sent before it have had
// the time to be answered: failures answered at once come back before the
// successes sent beside them, and counted as they come back, an engine
// failing 40% of the calls at once, whatever the load, looked as if it
// refused half of them at a run's start and shed less in a dip whose
// calls had all come back than outside it. The horizon is what it takes
// the engine to answer a call served as slowly as one in ten, twice over:
// twice the 90th percentile of the served calls' latency (before
// the first latency round, the longest seen; none before a call is
// served: there are no successes to wait for). Locked.
func (v *View) commit(now time.Duration) Judgement {
	horizon := 2 * v.latency.high
	judged := Undecided
	v.pending.take(now-horizon, horizon/4, func(f first) {
		if j := v.judge(now, f); j != Undecided {
			judged = j
		}
	})
	return judged
}

// checkProvisional checks a decrease taken on the engine refusing most with
// no verdict of load, once the calls sent in the span after it have had the
// time to be answered, and reports that it is to be undone. The first
// attempts sent in the span before it, counted in the order sent, were
// refused less than most (beyond chance, two standard deviations) and no
// more in their later half than in their earlier (three), by a replica
// calling four or more at a time; and where it then sent with three quarters
// as many in flight or fewer (its limit halved), it was refused as much (no
// drop beyond three standard deviations, as a trial's verdict of load needs;
// with two, 9 of 419 wrong decreases of a simulated start against an engine
// failing 40% at random were kept, on as few as 12 first attempts after
// them): the refusal did not move with the load it sent, and the order the
// calls were answered in made it look like most. A replica's first answers
// are its failures answered at once, ahead of the successes sent beside
// them: an engine failing 40% of all calls at random, whatever the load,
// looked as if it refused most to one replica of four 75 ms into a run,
// which halved and held 11-13 of its 32 for the run while its trial went
// undecided. A replica that overruns an engine is refused most in any order,
// more as it sends more, and less once it and its fleet send less: its
// decrease stands, as does that of a replica calling a call or two at a time
// (one of a large fleet), whose share is its fleet's. One that did not send
// less with its limit halved (its calls in flight under the limit: four
// replicas on two cores) is undone on its order alone. The window is kept:
// forgotten, the share of failures the engine's silence is judged against
// fell to nothing with it. Locked.
func (v *View) checkProvisional() bool {
	pv := &v.provisional
	before, after := pv.probe, pv.after
	pv.at = 0
	if len(before) < 2*v.o.MinCalls || len(after) < v.o.MinCalls {
		return false
	}
	slices.SortFunc(before, func(a, b sentCall) int { return cmp.Compare(a.sent, b.sent) })
	var early, late, all, then tally
	for i, c := range before {
		t := &early
		if i >= len(before)/2 {
			t = &late
		}
		t.add(c)
		all.add(c)
	}
	for _, c := range after {
		then.add(c)
	}
	p := all.share()
	switch {
	case p-2*sigma(p, all.n) >= v.o.OverloadShare:
		return false // refused most in the order sent too
	case z(early, late) >= 3:
		return false // refused more as the replica sent more
	case all.flight() < minHalved:
		return false // a call or two at a time: its share is its fleet's
	case then.flight() <= 0.75*all.flight() && z(then, all) >= 3:
		return false // refused less once it sent less: its load
	}
	return true
}

// z is b's share shed less a's, in standard deviations of their
// difference (a two-proportion test; 0 without both).
func z(a, b tally) float64 {
	if a.n == 0 || b.n == 0 {
		return 0
	}
	p := float64(a.shed+b.shed) / float64(a.n+b.n)
	sd := math.Sqrt(p * (1 - p) * (1/float64(a.n) + 1/float64(b.n)))
	if sd == 0 {
		return 0
	}
	return (b.share() - a.share()) / sd
}

// provisionalSpan is the least span before a provisional decrease whose
// first attempts check it: the horizon, before a call is served.
const provisionalSpan = 50 * time.Millisecond

// provisionalSpans is how many spans after the decrease the check waits at
// most for the MinCalls first attempts it needs sent after it: a replica
// whose retries, granted first, took most of its halved limit sent 7-9 in
// one span, and its check, lacking them, let a decrease taken by chance
// stand (one replica of four against 40% failed at random, at 6-9 of its
// 32 for the run). Past them (a backlog's end: no first attempt left),
// the decrease stands.
const provisionalSpans = 4

// judge runs the trial with a call, starting one when the sheds are
// suspect, and returns the verdict reached, if any. First attempts and
// retries count apart (see trial): pooled with the first attempts, the
// retries a dip holds more of made an engine failing 40% of its calls at
// random look loaded (its limit at 1 for the run). Locked.
func (v *View) judge(now time.Duration, c first) Judgement {
	if v.o.NoDips {
		return Undecided
	}
	if !v.trial.on && v.standing(now) == Load {
		if c.sent >= v.verdict.at && !v.verdict.retried && v.belied(now, c) {
			// Try the engine again, from the limit the verdict was found
			// at, its sheds still the engine's meanwhile: a replica of a
			// fleet whose other replicas have not come down yet sees its
			// own sending less change nothing either (4 replicas against
			// the capacity engine, taken back at once: 492 reads
			// dead-lettered). The fleet's dips tell them apart; once.
			v.verdict.retried, v.retrying = true, true
			v.trial.start(now)
		}
		return Undecided
	}
	if !v.trial.on {
		if !v.suspect(now, false) {
			return Undecided
		}
		v.trial.start(now)
		return Undecided
	}
	if v.faded(now) {
		v.trial.on = false // nothing left worth its dips: undecided
		return Undecided
	}
	if c.sent < v.trial.began {
		return Undecided // sent before the trial
	}
	stratum := firsts
	if !c.fresh {
		stratum = retried
	}
	// A dip's low calls, counted in the order sent, are followed by the
	// normal calls sent after it: the first of those closes the dip.
	boundary := !c.low && v.trial.lastLow
	v.trial.lastLow = c.low
	v.trial.add(stratum, c.low, c.shed, c.inFlight)
	odds, bound := v.trial.odds(v.backgrounds(now)), math.Log(v.o.Confidence)
	if v.trial.lows() < v.o.MinCalls || v.trial.normals() < v.o.MinCalls {
		odds = 0 // too little of either to set them against each other
	} else if v.trial.rising() {
		// More shed in the dips than outside them, beyond chance: the
		// engine's load grew under the trial (the fleet's slow start, an
		// engine slowing down), which neither hypothesis is. Start again.
		v.trial.start(now)
		return Undecided
	}
	switch {
	case boundary && odds >= bound && v.trial.z() >= 3:
		// The odds take the normal share for known; on a few dozen calls
		// it is not, and a dip whose calls happen to be served while
		// those beside it happen to fail (a quarter failing on their own,
		// at a run's start) is no load: the drop must be beyond chance
		// too, three standard deviations of it. On MinCalls a side: a
		// replica of a large fleet holds eight first attempts in a dip, and
		// on 30 its fleet's overrun of an engine lasted a second.
		// Looked at once a dip, when its calls are all counted, not at
		// every call: a test of three standard deviations looked at after
		// every call is crossed by chance more often than one looked at
		// once a dip. Looked at every call, 26 of 3,000 simulated trials
		// against an engine failing 23% of its calls at random, whatever
		// the load, found it loaded, and a four-replica partial mix billed
		// a quarter of its rate in 3 of about 110 runs, its always-503
		// reads called up to 7 times where 4 are their budget (their
		// sheds credited). Once a dip: 10 of 3,000, a loaded engine found
		// so after as many dips, but for one at its edge (8% shed, none in
		// the dips: 26 dips on average against 21)
		// (TestAVerdictOfLoadIsLookedForOnceADip).
		v.verdict = verdict{is: Load, at: now, share: v.trial.normalShare(v.o.MinCalls), flight: v.trial.flight(),
			strong: v.trial.flight() >= minHalved || v.trial.lowSheds() == 0, retried: v.verdict.is == Load && v.verdict.retried}
	case odds <= -ownOdds*bound && v.trial.dips >= 2 && now >= v.trial.dipEnd-v.o.DipFor && v.ownPlausible() &&
		v.trial.lows() >= 3*v.o.MinCalls && v.trial.normals() >= 3*v.o.MinCalls:
		// The reads' own needs more (30 calls a side, two dips, higher
		// odds): a replica that dipped alone (its fleet not suspecting
		// yet, or at its least limit already) sees the same share whatever
		// the load, and taken for the reads' own, the engine's load would
		// be charged to them.
		v.verdict = verdict{is: Own, at: now, background: v.trial.background(firsts, v.o.MinCalls),
			retryBackground: v.trial.background(retried, v.o.MinCalls)}
	default:
		if v.trial.dips >= v.o.MaxDips && now >= v.trial.dipEnd {
			v.trial.on = false // undecided: the next suspicion starts again
		}
		return Undecided
	}
	v.trial.on = false
	return v.verdict.is
}

// belied tests a standing verdict of load with a call sent after it: the
// calls sent at 0.6 of the trial's calls in flight or less, 30 at least,
// were shed as much as the trial's first attempts outside its dips, on the
// odds the trial takes for the reads' own, while the engine does not refuse
// most of the first attempts sent to it. A verdict of load is a
// prediction: the limit comes down on it, and sending less, the replica
// sees less shed. A trial's odds are chance too: an engine failing 40% of
// its calls at random, whatever the load, was found loaded once in a few
// runs (a dip's calls all served), and the limit then fell to 1 for the
// 30s the verdict stood, its backlog undrained. Retries count here as first
// attempts do: at a limit of 1 the limiter grants retries first, and the
// credited retries of the reads that always fail took the one slot for
// 11s, too few first attempts left to test the verdict. Locked.
func (v *View) belied(now time.Duration, c first) bool {
	vd := &v.verdict
	if vd.flight < minHalved || c.inFlight == 0 || float64(c.inFlight) > 0.6*vd.flight {
		return false
	}
	vd.low++
	if c.shed {
		vd.lowShed++
	}
	if vd.low < 3*v.o.MinCalls || v.refusesMost(now) {
		return false
	}
	p0 := clamp(vd.share, 0.005, 0.995)
	p1 := clamp(max(p0/2, 2*p0-1), 0.0025, 0.995)
	odds := float64(vd.lowShed)*math.Log(p1/p0) + float64(vd.low-vd.lowShed)*math.Log((1-p1)/(1-p0))
	return odds <= -ownOdds*math.Log(v.o.Confidence)
}

// minExcess is the least share shed over the background that is suspect.
const minExcess = 0.05

// ownOdds is how many times the odds a verdict of load needs a verdict of
// the reads' own needs, on the log scale (19 to 1 against 19^1.2 to 1,
// about 34 to 1).
const ownOdds = 1.2

// ownPlausible reports whether the trial's shares can be the reads' own:
// the dips lowered the replica's calls in flight enough to be a test (a
// replica calling a few at a time, as one of a large fleet does or one at
// a trickle, cannot send less: that the engine sheds as much then proves
// nothing), and the engine serves most of what it is sent. An engine refusing most is never found
// the reads' own: a fleet many times over its capacity sheds nearly as
// much at half its load, and a fleet whose replicas dip apart (one paused,
// another bursting) sees no change where its load is the cause. Locked.
func (v *View) ownPlausible() bool {
	return v.trial.halved() && v.trial.share(firsts, false) < v.o.OverloadShare && v.trial.steady()
}

// suspect reports sheds beyond the background, beyond chance, on enough
// evidence, while no standing verdict of load explains them (unless
// anyway: for the dips, which go on while the sheds do). Locked.
func (v *View) suspect(now time.Duration, anyway bool) bool {
	if !anyway && v.standing(now) == Load {
		return false
	}
	n, s := v.fresh.counts(now)
	if n < v.o.MinCalls || s < 2 {
		return false
	}
	// Three standard deviations: a sliding window crosses two every few
	// seconds by chance (one account's 5%, 13 of 128 shed at one point of
	// a 3,000-read backlog), and each crossing is a trial that cannot
	// decide so small a share, dipping until it gives up.
	const z = 3.0
	// By more than minExcess, beyond chance: a trial costs the dips (a few
	// hundred calls sent at half the limit, a tenth of a replica's goodput
	// while it runs), and an engine shedding 5% more than its background,
	// load or not, costs less than finding out. Taken at face value, a
	// share of 5% (one account's reads throttled) crossed it half the time,
	// and the trial, which cannot tell so small a share apart in a few
	// hundred calls, dipped for as long as the share lasted.
	null := v.background(now) + minExcess
	return float64(s)/float64(n)-null > z*sigma(null, n)
}

// faded reports the window's share shed back within minExcess of the
// background, at face value, on MinCalls first attempts or more: a trial
// started on a burst (a run of one account's throttled reads, 11% of a
// window where the account's reads are 5% of all) has nothing left to try
// once the burst has passed, and dipping on, 13 times in a backlog's 1.7s,
// it held one replica at 0.88 of a bare client. A share that
// stays over it (a fleet at its edge, shedding 8%; the reads' own 23%)
// keeps its trial. Locked.
func (v *View) faded(now time.Duration) bool {
	n, s := v.fresh.counts(now)
	return n >= v.o.MinCalls && float64(s)/float64(n) <= v.background(now)+minExcess
}

// backgrounds is the shares shed that a standing verdict found the reads'
// own, of first attempts and of retries. Locked.
func (v *View) backgrounds(now time.Duration) [2]float64 {
	if v.standing(now) == Own {
		return [2]float64{v.verdict.background, v.verdict.retryBackground}
	}
	return [2]float64{}
}

// background is the first attempts' share shed that a standing verdict
// found the reads' own. Locked.
func (v *View) background(now time.Duration) float64 { return v.backgrounds(now)[firsts] }

// dip asks for the next dip when none is pending, while a trial runs or
// the sheds are suspect: every replica that sees the engine shed beyond
// its background dips on the same wall-clock multiples, whether or not it
// is trying the engine itself, so that the fleet sends less together and a
// replica's trial sees what its fleet's load does. A dip to half a limit
// that the engine's servers still fill costs no goodput. Locked.
func (v *View) dip(now time.Duration) Dip {
	t := &v.trial
	if now < t.dipEnd || (t.on && t.dips >= v.o.MaxDips) || v.o.NoDips || !(t.on || v.suspect(now, true)) {
		return Dip{}
	}
	in := nextDip(v.o.Clock.Now(), v.o.DipEvery)
	d := Dip{In: in, For: min(max(v.o.DipFor, 2*v.latency.baseline, v.fresh.span(now, dipCalls)), 2*v.o.DipEvery/5)}
	t.dips++
	t.dipEnd = now + d.In + d.For
	return d
}

// refuseFor is how long the engine must have refused most of what it is
// sent before the replica pauses on its Retry-After: a fleet's slow start
// overruns an engine for a fraction of a second, each of its replicas
// down to a call or two, and paused then it left the engine idle; an
// engine that throttles the replica whatever it sends goes on.
const refuseFor = time.Second

// dipCalls is how many first attempts a dip should hold at least, at the
// rate the replica has been calling: a replica of a large fleet, calling
// a hundred reads a second, holds few in a dip of 50ms.
const dipCalls = 15

// shedding reports an engine shedding now (a call shed within a second),
// where a verdict of load stands (for Standing; lapsed, it is tried again
// as any suspicion is), or it refuses most of what it is sent and no
// standing verdict, or trial of one, has found that the reads' own. An
// engine that sheds no more is not overloaded, whatever was found of its
// sheds: the retries held for the budget at the end of a backlog go as
// soon as it is idle. Locked.
func (v *View) shedding(now time.Duration) bool {
	if v.shed == 0 || now-v.shed > shedRecent {
		return false
	}
	switch v.verdict.is {
	case Load:
		if now-v.verdict.at < v.o.Standing {
			return true
		}
		// Lapsed, it is tried again, and is no verdict meanwhile: kept
		// while the trial ran, a replica at a call in flight, whose dips
		// cannot send less, never decided, and each of its reads' own
		// failures brought its limit down again, for good
		// (TestALapsedVerdictOfLoadIsNoLongerLoad).
	case Own:
		if now-v.verdict.at < v.o.Standing || v.trial.on {
			return false
		}
	}
	return v.refusesMost(now)
}

// paced reports a strong verdict of load standing. A replica calling one
// or two at a time cannot halve what it sends in its dips: its verdict may
// be its fleet's, or only that its own calls fare better when it sends
// fewer (one joining an engine others keep full, at a limit of 1 and 2,
// was refused 98% of its calls and half of those in its dips). With every
// verdict of load paced, the joining replica billed 3-5 reads a second
// against 15 and opened its breaker in 2 of 15 runs. Unless its fleet's
// dips emptied the sheds: none of the dips' counted calls shed (ten at
// least, as a verdict needs), which chance does not give at a share that
// others keep high (0.15^10 at 85%), while a fleet just over an engine's
// capacity, dipping together, is shed nothing in its dips. Of 14 verdicts
// of 16 replicas against the capacity engine, 13 were found at under four
// calls in flight, 10 with dips shed nothing; unpaced, a replica at a
// limit of 1 re-sent its shed slot every few tenths of a millisecond.
// Locked.
func (v *View) paced(now time.Duration) bool {
	return v.standing(now) == Load && v.verdict.strong
}

// shedRecent is how recent a shed must be for the engine to shed now.
const shedRecent = time.Second

// refusesMost reports at least OverloadShare of the window's first
// attempts shed, beyond chance, over three times MinCalls of them at
// least: the window counts calls as they are answered, and at a run's
// start the failures answered at once come back before the successes
// sent beside them (an engine failing 40% of the calls at once looked as
// if it refused most to a replica that had made 10). Locked.
func (v *View) refusesMost(now time.Duration) bool {
	n, s := v.fresh.counts(now)
	least := 3 * v.o.MinCalls
	if v.o.NoDips {
		least = v.o.MinCalls // no trial to wait for: what it refuses is all it has
	}
	if n < least {
		return false
	}
	p := float64(s) / float64(n)
	return p-2*sigma(p, n) >= v.o.OverloadShare
}

// overloaded is the verdict at now: a trial found the engine's sheds its
// load (a replica that cannot dip takes that for granted), and it refuses
// most of what it is sent now. The retry budget is for that: where an
// engine the fleet overloads refuses most, retries multiply the load.
// Where it refuses less (a fleet at its edge, shedding a tenth), the limit
// paces every call, retries too, and a budget binding on top held the
// retries of a backlog's end while the engine sat idle (16 replicas: 600
// retries held for two seconds, the budget denying 3,000 asks). An engine
// refusing most that no trial found overloaded (one kept full by other
// clients) binds none either: the replica's own retries are then its only
// chance of an answer, and one holding them back saw the engine as silent
// as one that is down and opened its breaker. A queue in its latency alone
// trims the limit (Feedback.Queued), no more: latency is also the
// replica's own (a busy CPU, a GC), and it says nothing of retries. Nor
// does a verdict that is not strong: a replica joining an engine that
// four clients keep full, at a limit of 1 and 2, is refused 98% of its
// calls and half of those in its dips (its own calls fare better when it
// sends fewer, whatever the four others do), and with the budget bound on that verdict it billed 8-14 reads a second
// against 15. Locked.
func (v *View) overloaded(now time.Duration) bool {
	return v.shedding(now) && v.refusesMost(now) && ((v.verdict.is == Load && v.verdict.strong) || v.o.NoDips)
}

// queued reports a queue in the latency that is still the engine's: it
// stands only while the engine answers, a call answered within four
// baselines (100ms at least) or two of the last round's medians. Rounds
// close on answered calls only, so without this an engine that stopped
// answering (the end of a backlog, where only the reads that always fail
// are left) would be judged on the last queue it showed. Locked.
func (v *View) queued(now time.Duration) bool {
	fresh := max(4*v.latency.baseline, 100*time.Millisecond, 2*v.latency.last)
	a := v.silence.answered
	return v.latency.queued(now) && a != 0 && now-a <= fresh
}

// freshFailShare is the share of the window's first attempts that failed
// (0 without any). Locked.
func (v *View) freshFailShare(now time.Duration) float64 {
	p, _ := v.fresh.failShare(now)
	return p
}

// Overloaded reports whether the engine is overloaded: a trial found its
// sheds its load (or the replica cannot dip), and it refuses most of what
// it is sent now. The retry budget binds.
func (v *View) Overloaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.overloaded(v.o.Clock.Mono())
}

// Loaded reports a shed within the last second while a verdict of load
// stands: the engine sheds what the fleet's own load makes it shed, found
// so by a trial, not taken from a share alone (Shedding without it: the
// engine refusing most).
func (v *View) Loaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	return v.shed != 0 && now-v.shed <= shedRecent && v.standing(now) == Load
}

// Shedding reports whether a shed is the engine's load rather than the
// read's own: a trial found the engine's sheds move with the load the fleet
// sends, or it refuses most of what it is sent and no trial found that the
// reads' own. Its read is not charged for it.
func (v *View) Shedding() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.shedding(v.o.Clock.Mono())
}

// Trying reports whether a trial of the engine runs and may still decide:
// a shed now may yet be found its load, or the reads' own. A trial moves
// on the calls it counts, dipping every DipEvery: one whose last dip (or
// its start) is over a DipEvery past has no calls to dip on (a backlog's
// end, its last reads awaiting the verdict, make none), and one past its
// MaxDips ends undecided at its next call.
func (v *View) Trying() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, now := &v.trial, v.o.Clock.Mono()
	return t.on && now < max(t.dipEnd, t.began)+v.o.DipEvery && (t.dips < v.o.MaxDips || now < t.dipEnd)
}

// TrialSpan is the longest a trial dips for: MaxDips dips, DipEvery
// apart. A shed that awaits a verdict longer awaits one that may not come.
func (v *View) TrialSpan() time.Duration { return time.Duration(v.o.MaxDips) * v.o.DipEvery }

// Verdict is the verdict that stands: what the last trial found, until it
// lapses (Undecided when none stands).
func (v *View) Verdict() Judgement {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.standing(v.o.Clock.Mono())
}

// standing is the verdict that stands at now: the last trial's, for
// Standing after it was found (Undecided when none stands). Locked.
func (v *View) standing(now time.Duration) Judgement {
	if now-v.verdict.at < v.o.Standing {
		return v.verdict.is
	}
	return Undecided
}

// Serving reports whether the engine may be serving anyone: it is not
// silent, having failed every call sent for Quiet (four latency baselines,
// if longer) without answering one. A shed then is its load, or the read's
// own, never an outage: the breaker is for an engine that serves no one.
// Before the replica has been failed for that long (its first calls, the
// calls after its own pause), the engine has the benefit of the doubt.
func (v *View) Serving() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.silence.silent(v.o.Clock.Mono(), max(v.o.Quiet, 4*v.latency.baseline))
}

// Down reports whether, as far as read r can tell, the engine serves no
// one: since it last answered a call, the first attempts of more other
// reads failed than chance explains, given the share of first attempts
// that failed before (k of them, the fewest whose run has odds under 1 in
// 10,000 at that share; two at least). A read whose last attempt fails
// then cannot be told from the outage (an engine down from the start,
// before the breaker has seen enough to open): its failure is not its
// own. A read that fails alone, or while others are answered, is not
// helped; nor is one failing beside the usual run of its peers' own
// failures, however slowly the replica calls.
func (v *View) Down(r uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.silence.down(r)
}

// Back tells the View that the engine is back from an outage (the
// breaker closed): what it saw while the engine served no one says
// nothing of its load after. The window's first attempts go, with the
// outage's refusals: kept, they were most of what the view had seen, so
// it judged the engine to refuse most of what it is sent and credited the
// reads' own failures after the return as its load, each a decrease of
// the limit (14-37 of them in the second after an outage, against none:
// TestAnOutagesRefusalsAreForgottenOnTheReturn). A running trial goes
// too (its calls span the outage and the return), and a verdict of load
// found before the outage. A verdict of the reads' own stays: their
// failures are their own whether or not the engine was down.
func (v *View) Back() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.trial.on = false
	v.fresh.reset()
	v.provisional.at = 0
	v.refusing = 0
	v.retrying, v.undo = false, false
	if v.verdict.is == Load {
		v.verdict = verdict{}
	}
}

// Snapshot is the View's state, for metrics and logs.
type Snapshot struct {
	ShedShare  float64 // of the window's first attempts
	Verdict    Judgement
	Background float64 // the share shed found the reads' own
	Trial      bool    // a trial runs
	Latency    time.Duration
	Baseline   time.Duration
	Queued     bool
	Overloaded bool
}

// Snapshot returns the View's state now.
func (v *View) Snapshot() Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.o.Clock.Mono()
	n, s := v.fresh.counts(now)
	sn := Snapshot{Verdict: v.verdict.is, Background: v.background(now), Trial: v.trial.on,
		Latency: v.latency.last, Baseline: v.latency.baseline, Queued: v.queued(now), Overloaded: v.overloaded(now)}
	if n > 0 {
		sn.ShedShare = float64(s) / float64(n)
	}
	return sn
}
