package engine_test

import (
	"fmt"
	"time"

	fakeclock "github.com/meterline/meter-consumer/internal/clock"
	"github.com/meterline/meter-consumer/internal/engine"
	"github.com/meterline/meter-consumer/internal/retry"
)

// A replica calls an engine that refuses a quarter of its calls at once,
// but none while the replica sends less (its dips): the view finds the
// sheds the engine's load, and the limit comes down on them from then on.
func Example() {
	clk := fakeclock.NewFake(time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC))
	v, err := engine.New(engine.Options{Clock: clk, Rand: retry.NewRand(1)})
	if err != nil {
		panic(err)
	}
	var dipFrom, dipTo time.Duration
	for i := range 2000 {
		clk.Advance(time.Millisecond)
		now := clk.Mono()
		low := now >= dipFrom && now < dipTo
		call := engine.Call{Read: uint64(i), Answer: engine.Served, Latency: 10 * time.Millisecond, Low: low, InFlight: 32}
		if !low && i%4 == 0 {
			call.Answer, call.Latency = engine.Shed, 100*time.Microsecond
		}
		fb := v.Observe(call)
		if fb.Dip.For > 0 {
			dipFrom, dipTo = now+fb.Dip.In, now+fb.Dip.In+fb.Dip.For
		}
		if fb.Judged != engine.Undecided {
			fmt.Println("verdict:", fb.Judged)
		}
	}
	fmt.Println("a shed is the engine's:", v.Shedding())
	// Output:
	// verdict: load
	// a shed is the engine's: true
}
