package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A finding is one way an existing stream (or the records bucket, which is
// a stream) differs from what the service would make. A warning is logged
// and left; a refusal (refuse) stops start-up, since the service could not
// keep its promises on it. fix applies the service's setting when
// reconciling; it is nil when the server cannot change the setting, and
// then how says what a person does instead.
type finding struct {
	field  string // the setting, as streamFindings names it
	text   string
	refuse bool
	fix    func(*jetstream.StreamConfig)
	how    string
	// keep: an operator's policy, not a defect: warned, and never changed,
	// reconciling or not.
	keep bool
}

// streamFindings lists how an existing stream differs from the one the
// service would create, in the settings operators choose; each is a
// warning until a caller makes it a refusal.
func streamFindings(have, want jetstream.StreamConfig) []finding {
	var fs []finding
	if missing := uncovered(want.Subjects, have.Subjects); len(missing) > 0 {
		fs = append(fs, finding{field: "subjects", text: fmt.Sprintf("subjects %v do not list %v", have.Subjects, missing),
			fix: func(c *jetstream.StreamConfig) { c.Subjects = append(slices.Clone(c.Subjects), missing...) }})
	}
	if have.Retention != want.Retention {
		f := finding{field: "retention", text: fmt.Sprintf("retention is %s, not %s", have.Retention, want.Retention),
			fix: func(c *jetstream.StreamConfig) { c.Retention = want.Retention }}
		if have.Retention == jetstream.WorkQueuePolicy || want.Retention == jetstream.WorkQueuePolicy {
			f.fix, f.how = nil, fmt.Sprintf("the server cannot change a retention to or from work queue: create the stream anew with %s retention", want.Retention)
		}
		fs = append(fs, f)
	}
	if have.Discard != want.Discard {
		fs = append(fs, finding{field: "discard", text: fmt.Sprintf("discard is %s, not %s", have.Discard, want.Discard),
			fix: func(c *jetstream.StreamConfig) { c.Discard = want.Discard }})
	}
	if have.MaxAge != want.MaxAge {
		fs = append(fs, finding{field: "max_age", text: fmt.Sprintf("max age is %s, not %s", age(have.MaxAge), age(want.MaxAge)),
			fix: func(c *jetstream.StreamConfig) { c.MaxAge = want.MaxAge }})
	}
	if have.MaxBytes != want.MaxBytes {
		fs = append(fs, finding{field: "max_bytes", text: fmt.Sprintf("max bytes is %d, not %d", have.MaxBytes, want.MaxBytes),
			fix: func(c *jetstream.StreamConfig) { c.MaxBytes = want.MaxBytes }})
	}
	if have.Replicas != want.Replicas {
		fs = append(fs, finding{field: "replicas", text: fmt.Sprintf("replicas is %d, not %d", have.Replicas, want.Replicas),
			fix: func(c *jetstream.StreamConfig) { c.Replicas = want.Replicas }})
	}
	if have.Duplicates != want.Duplicates {
		fs = append(fs, finding{field: "duplicates", text: fmt.Sprintf("duplicate window is %s, not %s", have.Duplicates, want.Duplicates),
			fix: func(c *jetstream.StreamConfig) { c.Duplicates = want.Duplicates }})
	}
	if have.MaxMsgsPerSubject > 0 {
		fs = append(fs, finding{field: "max_msgs_per_subject",
			text: fmt.Sprintf("max msgs per subject is %d, not unlimited: the server deletes the older messages of a subject past it, settled or not", have.MaxMsgsPerSubject),
			fix:  func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = -1 }})
	}
	if have.Storage != want.Storage {
		fs = append(fs, finding{field: "storage", text: fmt.Sprintf("storage is %s, not %s", have.Storage, want.Storage),
			how: fmt.Sprintf("the server cannot change a stream's storage: create the stream anew with %s storage", want.Storage)})
	}
	return fs
}

// sourceFindings are the stream findings of the source stream, with one
// refusal: subjects the service does not consume (stream.subjects covers
// them not). Reads stored on them would never be delivered, and the audit,
// which takes what lies below the durable's ack floor for billed, would
// count them billed.
func sourceFindings(have, want jetstream.StreamConfig) []finding {
	fs := streamFindings(have, want)
	if extra := uncovered(have.Subjects, want.Subjects); len(extra) > 0 {
		fs = append(fs, finding{field: "subjects", refuse: true,
			text: fmt.Sprintf("subjects %v include %v, which stream.subjects %v does not cover: reads stored there would never be delivered, and `consumer audit` would count them billed below the ack floor",
				have.Subjects, extra, want.Subjects),
			how: fmt.Sprintf("set stream.subjects to %s, or move the other subjects to a stream of their own", strings.Join(have.Subjects, ","))})
	}
	return fs
}

// deadLetterFindings are the stream findings of the dead-letter stream,
// with the settings under which a copy JetStream already confirmed (its
// read TERMed after) can disappear made refusals: retention other than
// limits, discard old with a max bytes or max msgs, a per-subject limit (a
// meter's copies share a subject) and memory storage; and subjects that do
// not cover the dead-letter prefix, where a copy finds no stream. A max age
// is an operator's retention, as SQS, Pub/Sub and Kafka set on theirs:
// warned and kept (MeterConsumerDeadLettersNearMaxAge fires before the
// oldest copy is half that old). On the source stream all of these are
// warnings: whoever made it chose how long it keeps reads.
func deadLetterFindings(have, want jetstream.StreamConfig) []finding {
	fs := streamFindings(have, want)
	for i := range fs {
		f := &fs[i]
		switch f.field {
		case "retention":
			f.refuse, f.text = true, f.text+": the server deletes a copy once no consumer is interested in it (or one took it), after its read was TERMed, and the read is lost"
		case "discard":
			if have.MaxBytes > 0 || have.MaxMsgs > 0 { // without a limit, nothing is ever discarded
				f.refuse, f.text = true, f.text+": when the stream is full the server deletes the oldest copies, whose reads were TERMed, to make room"
			}
		case "subjects":
			f.refuse, f.text = true, f.text+": a copy published under the dead-letter prefix finds no stream (no responders), so its read is never TERMed and is retried until the source stream's max age"
		case "max_age":
			f.keep, f.fix = true, nil
			f.text += ": the server deletes a copy at that age, whether a person has seen it or not (an operator's retention: kept; MeterConsumerDeadLettersNearMaxAge fires when the oldest copy is past half of it)"
		case "storage":
			f.refuse, f.text = true, f.text+": a server restart loses every copy"
		case "max_msgs_per_subject":
			f.refuse, f.text = true, fmt.Sprintf("max msgs per subject is %d: the copies of one meter's reads share a subject and the server deletes all but the last %d", have.MaxMsgsPerSubject, have.MaxMsgsPerSubject)
		}
	}
	return fs
}

// recordsFindings checks the records bucket's stream. A record must live
// as long as its read can be in the source stream (streamMaxAge, the
// stream's own), and no longer than needed: a TTL of 0 or shorter than
// that, or memory storage, is refused; history and replicas are warnings.
func recordsFindings(have jetstream.StreamConfig, want jetstream.KeyValueConfig, stream string, streamMaxAge time.Duration) []finding {
	var fs []finding
	setTTL := func(c *jetstream.StreamConfig) { c.MaxAge = want.TTL }
	switch {
	case have.MaxAge == 0:
		fs = append(fs, finding{refuse: true, fix: setTTL,
			text: fmt.Sprintf("ttl is unlimited: records are never deleted and the bucket grows without bound; set it to %s", want.TTL)})
	case streamMaxAge > 0 && have.MaxAge < streamMaxAge:
		fs = append(fs, finding{refuse: true, fix: setTTL,
			text: fmt.Sprintf("ttl is %s, shorter than stream %s's max age (%s): a record is deleted while its read can still be delivered, and the read loses its hand-back credits and dead-letter decision; set it to %s",
				have.MaxAge, stream, streamMaxAge, want.TTL)})
	case streamMaxAge == 0 && have.MaxAge < want.TTL:
		fs = append(fs, finding{fix: setTTL,
			text: fmt.Sprintf("ttl is %s while stream %s has no max age: a read older than that loses its record", have.MaxAge, stream)})
	}
	if have.MaxMsgsPerSubject != int64(want.History) {
		fs = append(fs, finding{text: fmt.Sprintf("history is %d, not %d", have.MaxMsgsPerSubject, want.History),
			fix: func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = int64(want.History) }})
	}
	if have.Storage != want.Storage {
		fs = append(fs, finding{refuse: true,
			text: fmt.Sprintf("storage is %s, not %s: a server restart forgets every hand-back and dead-letter decision", have.Storage, want.Storage),
			how:  fmt.Sprintf("the server cannot change a bucket's storage: create it anew (`nats kv add %s --history 1 --ttl %s --storage file`)", want.Bucket, want.TTL)})
	}
	if have.Replicas != want.Replicas {
		fs = append(fs, finding{text: fmt.Sprintf("replicas is %d, not %d", have.Replicas, want.Replicas),
			fix: func(c *jetstream.StreamConfig) { c.Replicas = want.Replicas }})
	}
	return fs
}

// converge applies the findings of an existing stream: without
// t.Reconcile, a refusal is an error (ErrMismatch) and a warning goes to
// s.Warnings; with it, what the server cannot change is an error and the
// rest is changed in one UpdateStream, whose result is checked once more.
// It never updates twice.
func (t Topology) converge(ctx context.Context, js jetstream.JetStream, what string, info *jetstream.StreamInfo,
	check func(jetstream.StreamConfig) []finding, s *Setup) (*jetstream.StreamInfo, error) {
	name := what // e.g. "dead-letter stream METER_READS_DLQ"
	fs := check(info.Config)
	if !t.Reconcile {
		var refused []string
		for _, f := range fs {
			switch {
			case f.keep:
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s", name, f.text))
			case f.refuse && f.fix == nil:
				refused = append(refused, f.text+" ("+f.how+")")
			case f.refuse:
				refused = append(refused, f.text+" ("+t.Switches.reconciler()+" changes it)")
			case f.fix == nil:
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s (left as it is; the server cannot change it)", name, f.text))
			default:
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s (left as it is; %s would change it)", name, f.text, t.Switches.reconciler()))
			}
		}
		if len(refused) > 0 {
			return nil, fmt.Errorf("%s: %w: %s", name, ErrMismatch, joinProblems(refused))
		}
		return info, nil
	}
	var cannot []string
	kept := fs[:0:0]
	for _, f := range fs {
		switch {
		case f.keep:
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s", name, f.text))
		case f.fix == nil:
			cannot = append(cannot, f.text+": "+f.how)
		default:
			kept = append(kept, f)
		}
	}
	fs = kept
	if len(cannot) > 0 {
		return nil, fmt.Errorf("%s: %w: %s (%s cannot change this)", name, ErrMismatch, joinProblems(cannot), t.Switches.reconciler())
	}
	if len(fs) == 0 {
		return info, nil
	}
	cfg := info.Config
	for _, f := range fs {
		f.fix(&cfg)
	}
	st, err := js.UpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s (%s): %w", name, texts(fs), t.replicasRefused(err, cfg.Replicas))
	}
	after := st.CachedInfo()
	if left := changeable(check(after.Config)); len(left) > 0 {
		return nil, fmt.Errorf("reconcile %s: %w: the server kept %s after the update", name, ErrMismatch, texts(left))
	}
	for _, f := range fs {
		s.Reconciled = append(s.Reconciled, fmt.Sprintf("%s: %s (changed by %s)", name, f.text, t.Switches.reconciler()))
	}
	return after, nil
}

// changeable leaves out the findings reconciling keeps as they are.
func changeable(fs []finding) []finding {
	out := fs[:0:0]
	for _, f := range fs {
		if !f.keep {
			out = append(out, f)
		}
	}
	return out
}

func texts(fs []finding) string {
	t := make([]string, len(fs))
	for i, f := range fs {
		t[i] = f.text
	}
	return joinProblems(t)
}

// errReplicasNotSupported is the server's error code for replicas > 1 on a
// server that is not clustered.
const errReplicasNotSupported jetstream.ErrorCode = 10074

// replicasRefused makes the server's refusal of several replicas (it is
// not clustered) an ErrMismatch naming stream.replicas: waiting will not
// mend it, and one copy is only made when it is asked for.
func (t Topology) replicasRefused(err error, replicas int) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != errReplicasNotSupported {
		return err
	}
	return fmt.Errorf("%w: stream.replicas is %d and the server is not clustered: run JetStream as a cluster of 3 (one copy loses what it holds with one disk), or accept a single copy by setting stream.replicas to 1%s: %w",
		ErrMismatch, replicas, t.Switches.oneReplica(), err)
}
