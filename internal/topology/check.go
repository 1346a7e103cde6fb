package topology

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/stream"
)

// checkDurable compares an existing durable with the one the service would
// create. fatal lists what the server cannot change (delete and recreate
// the durable); fixable lists what reconciling updates and without which
// the service refuses to start, since it could not keep its promises on it.
// Each problem names the field and the fix. A different ack wait or max ack
// pending is not a problem: the service follows the durable's own.
//
// pull is how many reads one pull asks for, which the durable's
// max_request_batch must allow; a pull waits stream.PullExpiry on the server,
// which its max_request_expires must allow (a pull over either is answered
// 409 and nothing is delivered, for ever). The pull asks no byte limit, so
// max_request_max_bytes never binds. A max_ack_pending of -1 leaves the
// reads the service holds in memory (waiting out a retry delay) unbounded.
func checkDurable(have, want jetstream.ConsumerConfig, streamSubjects []string, pull int, sw Switches) (fixable, fatal []string) {
	if have.DeliverSubject != "" {
		fatal = append(fatal, fmt.Sprintf("deliver_subject is %q (a push consumer), the service pulls: delete the durable and let %s make it, or create a pull consumer", have.DeliverSubject, sw.creator()))
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
	if have.HeadersOnly {
		fixable = append(fixable, "headers_only is true: every read would arrive without its body, fail decoding and be dead-lettered as an empty copy; set headers_only to false")
	}
	if have.MaxRequestBatch > 0 && have.MaxRequestBatch < pull {
		fixable = append(fixable, fmt.Sprintf("max_request_batch is %d, below the %d reads one pull asks for: the server answers every pull 409 and nothing is delivered; raise max_request_batch to %d or 0 (no limit), or set consumer.pull_batch to %d or less",
			have.MaxRequestBatch, pull, pull, have.MaxRequestBatch))
	}
	if have.MaxRequestExpires > 0 && have.MaxRequestExpires < stream.PullExpiry {
		fixable = append(fixable, fmt.Sprintf("max_request_expires is %s, below the %s a pull waits on the server: the server answers every pull 409 and nothing is delivered; raise max_request_expires to %s or 0 (no limit)",
			have.MaxRequestExpires, stream.PullExpiry, stream.PullExpiry))
	}
	if have.InactiveThreshold > 0 {
		fixable = append(fixable, fmt.Sprintf("inactive_threshold is %s: the server deletes the durable, its ack state with it, once no replica has pulled for that long (the fleet scaled to zero, a long outage), and a durable made again delivers every retained read anew; set inactive_threshold to 0",
			have.InactiveThreshold))
	}
	if have.MaxAckPending < 0 {
		fixable = append(fixable, fmt.Sprintf("max_ack_pending is %d (unlimited): the reads waiting out a retry delay are held in this process, and nothing would bound them; set max_ack_pending to %d (consumer.max_ack_pending)",
			have.MaxAckPending, want.MaxAckPending))
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

// skipsReads reports whether the durable's deliver policy left behind reads
// the stream still holds: every policy but "all" starts past some (by
// start sequence, by start time, or where the stream ended when the durable
// was made: new, last, last per subject). Those reads were never delivered,
// and the audit, which takes what lies below the ack floor for billed, would
// count them billed. The server cannot change a deliver policy. When the
// stream holds no read before the durable's start, nothing is skipped: the
// note is then a warning.
func skipsReads(have jetstream.ConsumerConfig, created time.Time, st jetstream.StreamState) (skips bool, note string) {
	held := st.Msgs > 0
	var start string
	switch have.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		return false, ""
	case jetstream.DeliverByStartSequencePolicy:
		start = fmt.Sprintf("sequence %d", have.OptStartSeq)
		skips = held && st.FirstSeq < have.OptStartSeq
	case jetstream.DeliverByStartTimePolicy:
		at := time.Time{}
		if have.OptStartTime != nil {
			at = *have.OptStartTime
		}
		start = at.UTC().Format(time.RFC3339)
		skips = held && st.FirstTime.Before(at)
	default: // new, last, last per subject: where the stream ended when the durable was made
		start = "its creation, " + created.UTC().Format(time.RFC3339)
		skips = held && st.FirstTime.Before(created)
	}
	if !skips {
		return false, fmt.Sprintf("deliver_policy is %s (from %s), not all: the stream holds no read stored before that, so none was skipped; a durable the service makes delivers all", have.DeliverPolicy, start)
	}
	return true, fmt.Sprintf("deliver_policy is %s (from %s), not all: the reads the stream holds from before that (from sequence %d, stored %s) were never delivered, and `consumer audit` would count them billed; the server cannot change a deliver policy: delete the durable and let the service make it (or `nats consumer add --deliver all`), and its reads still in the stream are posted again under their idempotency keys",
		have.DeliverPolicy, start, st.FirstSeq, st.FirstTime.UTC().Format(time.RFC3339))
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func joinProblems(p []string) string { return strings.Join(p, "; ") }

func age(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// reconciledDurable is have with what checkDurable finds fixed and the ack
// wait and max ack pending set to the service's; pull is the pull batch on
// that ack wait. What the server cannot change, and a pause, are left.
func reconciledDurable(have, want jetstream.ConsumerConfig, pull int) jetstream.ConsumerConfig {
	upd := have
	upd.MaxDeliver, upd.BackOff, upd.AckWait, upd.MaxAckPending = -1, nil, want.AckWait, want.MaxAckPending
	upd.FilterSubject, upd.FilterSubjects = "", want.FilterSubjects
	upd.HeadersOnly = false
	upd.InactiveThreshold = 0
	if upd.MaxRequestBatch > 0 && upd.MaxRequestBatch < pull {
		upd.MaxRequestBatch = pull
	}
	if upd.MaxRequestExpires > 0 && upd.MaxRequestExpires < stream.PullExpiry {
		upd.MaxRequestExpires = stream.PullExpiry
	}
	return upd
}
