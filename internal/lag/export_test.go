package lag

import "time"

// SetNow replaces the reader's clock.
func SetNow(r *Reader, now func() time.Time) { r.now = now }
