package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/retry"
)

// Phase is what the rate engine is going through: its capacity, and whether
// it answers at all.
type Phase string

// The phases, the closed set of the phase gauge's label.
const (
	// PhaseNormal: the engine's own capacity (by default 200 reads a
	// second), each served call's outcome drawn for its read.
	PhaseNormal Phase = "normal"
	// PhaseOverload: the capacity of RateEngineOptions.Overload (by
	// default 10 reads a second, half the head-end's rate): calls queue,
	// their latency rises, and past the short queue they are shed with 503
	// or 429. A served call's outcome is drawn as in PhaseNormal.
	PhaseOverload Phase = "overload"
	// PhaseOutage: every call is answered 503 at once, before it enters
	// the engine (it is not in the ledger and nothing is billed), whatever
	// its key; the calls inside when it began are answered as they were
	// going to be.
	PhaseOutage Phase = "outage"
)

// phases are the valid phases, in the order the gauge lists them.
var phases = []Phase{PhaseNormal, PhaseOverload, PhaseOutage}

func (p Phase) valid() bool {
	for _, q := range phases {
		if p == q {
			return true
		}
	}
	return false
}

// Step is one phase of a Schedule and how long it lasts.
type Step struct {
	Phase Phase
	For   time.Duration
}

// Schedule is a cycle of steps, repeated from the first once the last ends.
type Schedule []Step

// DefaultSchedule is the demo's incidents: 60s normal, 30s overloaded, 60s
// normal, 20s down, and again (a cycle of 2m50s).
var DefaultSchedule = Schedule{
	{PhaseNormal, 60 * time.Second},
	{PhaseOverload, 30 * time.Second},
	{PhaseNormal, 60 * time.Second},
	{PhaseOutage, 20 * time.Second},
}

// validate returns an error wrapping ErrConfig naming every bad step.
func (s Schedule) validate() error {
	if len(s) == 0 {
		return fmt.Errorf("%w: incidents: the schedule has no step", ErrConfig)
	}
	var bad []string
	for i, st := range s {
		if !st.Phase.valid() {
			bad = append(bad, fmt.Sprintf("step %d: phase %q is not normal, overload or outage", i, st.Phase))
		}
		if st.For <= 0 {
			bad = append(bad, fmt.Sprintf("step %d: For %v is not > 0", i, st.For))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: incidents: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}

// cycle is the length of one round of the schedule.
func (s Schedule) cycle() time.Duration {
	var c time.Duration
	for _, st := range s {
		c += st.For
	}
	return c
}

// At returns the step in force elapsed after the schedule started (its
// index in s) and the time left until it ends. A negative elapsed is the
// start. s must be valid (non-empty, every For > 0).
func (s Schedule) At(elapsed time.Duration) (step int, left time.Duration) {
	e := max(elapsed, 0) % s.cycle()
	for i, st := range s {
		if e < st.For {
			return i, st.For - e
		}
		e -= st.For
	}
	return 0, s[0].For // unreachable: e < cycle
}

// String is the schedule as the log says it: "60s normal, 30s overload,
// 60s normal, 20s outage, repeated" for DefaultSchedule.
func (s Schedule) String() string {
	parts := make([]string, 0, len(s)+1)
	for _, st := range s {
		d := st.For.String()
		if st.For%time.Second == 0 {
			d = fmt.Sprintf("%ds", st.For/time.Second) // 60s, not 1m0s
		}
		parts = append(parts, d+" "+string(st.Phase))
	}
	return strings.Join(append(parts, "repeated"), ", ")
}

// Incidents puts a RateEngine through a Schedule: an overload and an
// outage now and then, so that a newcomer sees the consumer's adaptive
// limit and its breaker act. Each change of phase is logged once by the
// engine's logger, at warn for an incident and at info for the recovery.
type Incidents struct {
	Engine *RateEngine
	// Schedule is the cycle of phases (default DefaultSchedule).
	Schedule Schedule
	// Now is the schedule's clock (default time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx ends, returning ctx's error then (default
	// retry.Sleep). A test passes one that moves its clock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Run sets the engine's phase as the schedule says, from now until ctx
// ends, then returns nil, leaving the phase in force. The phase follows the
// clock, not the sum of the sleeps: a late wake-up shortens the next phase
// rather than shifting every one after it. It returns an error wrapping
// ErrConfig when in is misconfigured.
func (in *Incidents) Run(ctx context.Context) error {
	if in.Engine == nil {
		return fmt.Errorf("%w: incidents: Engine is nil", ErrConfig)
	}
	sched := in.Schedule
	if sched == nil {
		sched = DefaultSchedule
	}
	if err := sched.validate(); err != nil {
		return err
	}
	now, sleep := in.Now, in.Sleep
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = retry.Sleep
	}
	re := in.Engine
	log := re.opts.Logger
	log.Info("demo: rate engine incidents scheduled", slog.String("schedule", sched.String()))

	start := now()
	for {
		i, left := sched.At(now().Sub(start))
		if p := sched[i].Phase; p != re.Phase() {
			from := re.Phase()
			re.setPhase(p)
			next := sched[(i+1)%len(sched)]
			in.logChange(log, from, p, left, next)
		}
		if sleep(ctx, left) != nil {
			return nil
		}
	}
}

// logChange says that the engine went from from to p, for left, then next.
func (in *Incidents) logChange(log *slog.Logger, from, p Phase, left time.Duration, next Step) {
	re := in.Engine
	c := re.capacity(p)
	left = left.Round(100 * time.Millisecond) // 30s, not 29.999390439s
	switch p {
	case PhaseOverload:
		log.Warn("demo: rate engine overloaded: it queues and sheds with 503 and 429",
			slog.Int("servers", c.Servers), slog.Duration("service_time", c.ServiceTime), slog.Int("queue", c.Queue),
			slog.Float64("capacity_per_second", c.perSecond()), slog.Duration("for", left))
	case PhaseOutage:
		log.Warn("demo: rate engine down: every call answered 503", slog.Duration("for", left))
	default:
		log.Info("demo: rate engine recovered", slog.String("from", string(from)),
			slog.Float64("capacity_per_second", c.perSecond()), slog.Duration("for", left),
			slog.String("next", string(next.Phase)))
	}
}
