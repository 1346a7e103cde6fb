package stream

import (
	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/retry"
)

// Engine builds the engine's view the pipeline o configures judges every
// call by, tuned by eo, and the breaker bo asks for (nil: none), into
// o.View and o.Breaker. The view pauses the replica for at most o's retry
// policy's MaxServerWait unless eo says otherwise, cannot dip without an
// adaptive limit (o.Limiter nil), and shares o's random source and clock
// with the breaker and the consumer: it fills them in when o has none, as
// New would. The breaker opens only while the view judges the engine
// silent, unless bo.Silent says otherwise. New does not call it: the
// service's Pipeline does, and so do the tests for the options they tune,
// this package's own among them.
func Engine(o *Options, eo engine.Options, bo *breaker.Options) error {
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Rand == nil {
		o.Rand = retry.NewRand(uint64(o.Clock.Now().UnixNano()))
	}
	if eo.MaxPause == 0 {
		eo.MaxPause = o.Policy.MaxServerWait
	}
	if eo.Rand == nil {
		eo.Rand = o.Rand
	}
	if eo.Clock == nil {
		eo.Clock = o.Clock
	}
	if o.Limiter == nil {
		eo.NoDips = true // Concurrency alone bounds the calls: nothing can dip
	}
	view, err := engine.New(eo)
	if err != nil {
		return err
	}
	o.View, o.Breaker = view, nil
	if bo == nil {
		return nil
	}
	b := *bo
	if b.Rand == nil {
		b.Rand = o.Rand
	}
	if b.Clock == nil {
		b.Clock = o.Clock
	}
	if b.Silent == nil {
		// An outage is an engine that serves no one, judged over time:
		// quick refusals while others are answered are its load or the
		// reads' own.
		b.Silent = func() bool { return !view.Serving() }
	}
	o.Breaker, err = breaker.New(b)
	return err
}
