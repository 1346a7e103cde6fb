package downstream

import (
	"context"
	"time"

	"github.com/meterline/meter-consumer/internal/meter"
)

var _ Sink = Discard{}

// Discard is the no-op sink: it takes every read at once and bills nothing.
// It stands in for the rate engine where the pipeline itself is under test
// or measured.
type Discard struct{}

// Deliver returns nil at once.
func (Discard) Deliver(context.Context, meter.Read) error { return nil }

// Timeout is the bound of one call, as HTTP's is: Deliver returns at once,
// so the least there is. Given as the pipeline's sink timeout it says the
// sink bounds its calls, so that the pipeline adds no timer of its own, as
// with HTTP.
func (Discard) Timeout() time.Duration { return time.Nanosecond }
