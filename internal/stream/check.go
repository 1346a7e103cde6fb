package stream

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// checkDurable compares an existing durable with the one the service would
// create. fatal lists what the server cannot change (delete and recreate
// the durable); fixable lists what --reconcile updates and without which the
// service refuses to start, since it could not keep its promises on it.
// Each problem names the field and the fix. A different ack wait or max ack
// pending is not a problem: the service follows the durable's own.
func checkDurable(have, want jetstream.ConsumerConfig, streamSubjects []string) (fixable, fatal []string) {
	if have.DeliverSubject != "" {
		fatal = append(fatal, fmt.Sprintf("deliver_subject is %q (a push consumer), the service pulls: delete the durable and let --create-streams make it, or create a pull consumer", have.DeliverSubject))
	}
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		fatal = append(fatal, fmt.Sprintf("ack_policy is %s, the service acks each read: it must be explicit (the server cannot change an ack policy: delete and recreate the durable)", have.AckPolicy))
	}
	if have.MaxDeliver > 0 {
		fixable = append(fixable, fmt.Sprintf("max_deliver is %d: the server would stop delivering a read after %d deliveries, before the service's own budget (retry.max_attempts, with its hand-backs) ends and without a dead-letter copy; set max_deliver to -1", have.MaxDeliver, have.MaxDeliver))
	}
	if len(have.BackOff) > 0 {
		fixable = append(fixable, fmt.Sprintf("backoff is %v: it has no jitter and replaces the service's own delays; remove it", have.BackOff))
	}
	filter := slices.Clone(have.FilterSubjects)
	if have.FilterSubject != "" {
		filter = append(filter, have.FilterSubject)
	}
	if len(filter) == 0 {
		filter = streamSubjects
	}
	if !sameSet(filter, want.FilterSubjects) {
		fixable = append(fixable, fmt.Sprintf("it consumes %v, the service is configured for %v (stream.subjects): set filter_subjects to %s, or configure the subjects it has",
			filter, want.FilterSubjects, strings.Join(want.FilterSubjects, ",")))
	}
	return fixable, fatal
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func joinProblems(p []string) string { return strings.Join(p, "; ") }

// streamDiffs lists how an existing stream differs from the one the
// service would create, in the settings operators choose.
func streamDiffs(have, want jetstream.StreamConfig) []string {
	var d []string
	if missing := subtract(want.Subjects, have.Subjects); len(missing) > 0 {
		d = append(d, fmt.Sprintf("subjects %v do not list %v", have.Subjects, missing))
	}
	if have.Retention != want.Retention {
		d = append(d, fmt.Sprintf("retention is %s, not %s", have.Retention, want.Retention))
	}
	if have.Discard != want.Discard {
		d = append(d, fmt.Sprintf("discard is %s, not %s", have.Discard, want.Discard))
	}
	if have.MaxAge != want.MaxAge {
		d = append(d, fmt.Sprintf("max age is %s, not %s", age(have.MaxAge), age(want.MaxAge)))
	}
	if have.MaxBytes != want.MaxBytes {
		d = append(d, fmt.Sprintf("max bytes is %d, not %d", have.MaxBytes, want.MaxBytes))
	}
	if have.Replicas != want.Replicas {
		d = append(d, fmt.Sprintf("replicas is %d, not %d", have.Replicas, want.Replicas))
	}
	if have.Duplicates != want.Duplicates {
		d = append(d, fmt.Sprintf("duplicate window is %s, not %s", have.Duplicates, want.Duplicates))
	}
	if have.Storage != want.Storage {
		d = append(d, fmt.Sprintf("storage is %s, not %s", have.Storage, want.Storage))
	}
	return d
}

// reconciled is have with the settings the service manages taken from want;
// subjects are added, never removed, and what the server cannot change
// (retention, storage) is left.
func reconciled(have, want jetstream.StreamConfig) jetstream.StreamConfig {
	c := have
	c.Subjects = append(slices.Clone(have.Subjects), subtract(want.Subjects, have.Subjects)...)
	c.Discard, c.MaxAge, c.MaxBytes, c.Replicas, c.Duplicates = want.Discard, want.MaxAge, want.MaxBytes, want.Replicas, want.Duplicates
	return c
}

func subtract(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func age(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}
