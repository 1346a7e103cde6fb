// Package budget is a client retry budget: over a sliding window, retries
// may add at most a share (Ratio; the binary's 10% is the SRE book's client
// retry budget) of the first attempts, plus a small allowance of MinPerSecond
// so that a quiet replica can still retry (Finagle's RetryBudget and tower's
// Budget have the same floor).
//
// When most calls fail, per-read backoff alone still lets every read retry:
// the load on a struggling engine is the first attempts times the attempt
// budget. A retry budget caps it at (1 + Ratio) times the first attempts,
// whatever the failure rate. A retry over the budget is not thrown away: the
// caller holds it and asks again later.
//
// Its window runs on the monotonic clock of Options.Clock: a step of the
// wall clock neither empties it nor keeps stale buckets in it.
//
// A Budget is safe for concurrent use.
package budget
