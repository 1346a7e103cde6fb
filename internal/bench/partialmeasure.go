package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/simengine"
)

// PartialRun is how the product or the bare client drained a cell of the
// engine matrix, read from the engine's ledger (partialOutcome).
type PartialRun struct {
	// Healthy reads (200 to every call); HealthyBilled of them billed, the
	// last of them at HealthyElapsed from the start (HealthyDone), or the
	// deadline when some were not; Goodput is HealthyBilled /
	// HealthyElapsed.
	Healthy, HealthyBilled int
	HealthyDone            bool
	HealthyElapsed         time.Duration
	Goodput                float64
	// Lateness of each retry: from the answer of the failed call to the
	// read's next call, less the delay the variant asked for it.
	Lateness Lateness
	// The reads that always fail: the fewest and most calls of one.
	AlwaysBad, AlwaysCallsMin, AlwaysCallsMax int
	// BillableDeadLettered reads were dead-lettered though the engine
	// would have billed them.
	BillableDeadLettered int
}

// mixEngine serves an engine of shape, answering the reads as their kinds
// say, seeded from seed: their failures at once (Refuse) when atOnce, or
// once served (Answer), after the shape's service time.
func mixEngine(ctx context.Context, shape LatencyShape, kinds []readKind, seed uint64, atOnce bool) (*simengine.Server, error) {
	o := shape.options(seed)
	if atOnce {
		o.Refuse = refusal(kinds)
	} else {
		o.Answer = answer(kinds)
	}
	return serveEngine(ctx, o)
}

// Lateness is how late a variant's retries were: Count measured, Missing
// that could not be (no delay asked is known for the failed call, or the
// read was not called again before the variant stopped).
type Lateness struct {
	Count   int `json:"count"`
	Missing int `json:"missing"`
	Percentiles
}

// partialOutcome reads what the engine's ledger says of one variant: read i
// had kind kinds[i] and stream sequence i+1; the variant started at start
// and ran for elapsed; naks holds the delays it asked, deadLettered the
// reads it dead-lettered (by index).
type partialOutcome struct {
	ledger       map[string][]simengine.Call
	kinds        []readKind
	start        time.Time
	elapsed      time.Duration
	naks         *nakCapture
	deadLettered func(i int) bool
}

// measure reads the variant's figures from the ledger.
func (o partialOutcome) measure() (run PartialRun) {
	var late []time.Duration
	var lastHealthy time.Time
	run.AlwaysCallsMin = math.MaxInt
	for i, kind := range o.kinds {
		calls := o.ledger[Key(i)]
		switch kind {
		case healthy:
			run.Healthy++
			for _, c := range calls {
				if c.Outcome == simengine.Billed {
					run.HealthyBilled++
					if at := answered(c); at.After(lastHealthy) {
						lastHealthy = at
					}
				}
			}
		case alwaysBad:
			run.AlwaysBad++
			run.AlwaysCallsMin, run.AlwaysCallsMax = min(run.AlwaysCallsMin, len(calls)), max(run.AlwaysCallsMax, len(calls))
		}
		if kind != alwaysBad && o.deadLettered(i) {
			run.BillableDeadLettered++
		}
		late, run.Lateness.Missing = o.lateness(late, run.Lateness.Missing, calls, uint64(i+1))
	}
	if run.AlwaysBad == 0 {
		run.AlwaysCallsMin = 0
	}
	run.Lateness.Count = len(late)
	run.Lateness.Percentiles = percentilesOf(late)
	run.HealthyElapsed = o.elapsed
	if run.HealthyBilled == run.Healthy && run.Healthy > 0 {
		run.HealthyDone = true
		run.HealthyElapsed = lastHealthy.Sub(o.start)
	}
	if run.HealthyElapsed > 0 {
		run.Goodput = float64(run.HealthyBilled) / run.HealthyElapsed.Seconds()
	}
	return run
}

// lateness appends, for each delay asked for the read at seq, the time from
// the answer of the failed call it followed to the next call, less the
// delay.
func (o partialOutcome) lateness(late []time.Duration, missing int, calls []simengine.Call, seq uint64) ([]time.Duration, int) {
	for _, a := range o.naks.all(seq) {
		failed := -1
		for j, c := range calls {
			if !billedOrDuplicate(c) && !answered(c).After(a.at) {
				failed = j
			}
		}
		if failed < 0 || failed+1 >= len(calls) {
			missing++
			continue
		}
		late = append(late, calls[failed+1].At.Sub(answered(calls[failed]))-a.delay)
	}
	return late, missing
}

// answered is when the engine answered c: its latency counts from its
// arrival; a call its client left before it was served has only a wait.
func answered(c simengine.Call) time.Time { return c.At.Add(max(c.Wait, c.Latency)) }

func billedOrDuplicate(c simengine.Call) bool {
	return c.Outcome == simengine.Billed || c.Outcome == simengine.Duplicate
}

// deadLetteredReads returns the reads (by index) whose copies are in the
// dead-letter stream, with the reason of each.
func deadLetteredReads(ctx context.Context, e *env) (map[int]string, error) {
	st, err := e.js.Stream(ctx, e.topo.DLQStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	out := map[int]string{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("dead-letter copy %d: %w", seq, err)
		}
		orig, err := strconv.ParseUint(m.Header.Get(dlq.HeaderSequence), 10, 64)
		if err != nil || orig == 0 {
			return nil, fmt.Errorf("dead-letter copy %d: no %s header", seq, dlq.HeaderSequence)
		}
		out[int(orig-1)] = m.Header.Get(dlq.HeaderReason)
	}
	return out, nil
}
