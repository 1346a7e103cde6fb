package downstream

import "time"

// WithClock sets the clock of the reload checks, for tests.
func WithClock(o HTTPOptions, now func() time.Time) HTTPOptions {
	o.now = now
	return o
}
