package downstream

import "time"

// WithClock sets the monotonic clock of the reload checks, for tests.
func WithClock(o HTTPOptions, mono func() time.Duration) HTTPOptions {
	o.mono = mono
	return o
}
