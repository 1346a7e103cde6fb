// Package retry owns the backoff arithmetic for the consumer: how long to wait
// before the next attempt, when to stop retrying, and a small driver for the
// few places where the service retries in-process (connecting at start-up,
// publishing a dead-letter copy).
//
// # Backoff
//
// A [Policy] uses full jitter: the delay after attempt n is drawn uniformly
// from the closed band [0, min(Cap, Base·2^(n-1))]. The arithmetic is integer
// only and never overflows, whatever the attempt number. A downstream's
// Retry-After can raise the delay through [Policy.DelayWithFloor], bounded by
// MaxServerWait. Every delay takes exactly one draw from a [Source], so a
// seeded source gives a reproducible schedule.
//
// # Errors
//
//   - [Policy.Validate] returns every violation joined with errors.Join; each
//     names the field, its value and what is valid, and matches
//     [ErrInvalidPolicy].
//   - [Driver.Do] returns nil on success, a permanent error unchanged, an
//     [*ExhaustedError] (matching [ErrExhausted] and the last error) when the
//     attempts run out, and, when the context ends, an error matching both the
//     context's error and the last error from the operation.
//
// # Concurrency
//
// [Policy] and [Driver] are values that are only read, so they are safe for
// concurrent use provided their Source is. A [*Rand] from [NewRand] is safe for
// concurrent use; a *math/rand/v2.Rand is not.
package retry
