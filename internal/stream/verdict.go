package stream

import (
	"fmt"
	"time"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/engine"
)

// fate is what becomes of one delivery of a read.
type fate int

const (
	// fateCall: deliver the read to the rate engine (again, after a wait for
	// the breaker), then decide once more.
	fateCall fate = iota
	// fateAck: the engine answered 2xx.
	fateAck
	// fateRetry: hold the read for its delay, then NAK it for redelivery.
	fateRetry
	// fateDeadLetter: record the decision to dead-letter the read (a
	// decision on record first, another delivery's, stays), then decide
	// once more: the copy carries the decision on record.
	fateDeadLetter
	// fateCopy: store the dead-letter copy, then decide once more.
	fateCopy
	// fateTerm: the copy is confirmed: TERM the original.
	fateTerm
	// fateHandBack: the process is stopping; record the hand-back and NAK it at
	// once, uncharged, for another replica.
	fateHandBack
	// fateReject: not a JetStream delivery (no metadata to count attempts by):
	// NAK it at once.
	fateReject
	// fateDrop: the delivery's lease ran out (the connection was down past
	// its ack wait): nothing is written or settled for it; the server
	// redelivers it, perhaps to another replica.
	fateDrop
)

var fates = [...]string{fateCall: "call", fateAck: "ack", fateRetry: "retry", fateDeadLetter: "dead-letter", fateCopy: "copy",
	fateTerm: "term", fateHandBack: "hand back", fateReject: "reject", fateDrop: "drop"}

func (f fate) String() string { return fates[f] }

// outcome is the settlement a fate ends in, as messages_total counts it
// ("" for a call and a drop, which are not one; a dead-letter and its copy
// end in a TERM, unless the copy is not confirmed: then in a retry).
func (f fate) outcome() Outcome {
	switch f {
	case fateAck:
		return OutcomeAck
	case fateDeadLetter, fateCopy, fateTerm:
		return OutcomeTerm
	case fateRetry, fateHandBack, fateReject:
		return OutcomeNak
	}
	return ""
}

// leased reports whether carrying the fate out needs the delivery's lease:
// it writes the read's record or copy, or settles the message. An Ack does
// not: the engine billed the read, whoever holds its delivery now.
func (f fate) leased() bool {
	switch f {
	case fateRetry, fateDeadLetter, fateCopy, fateTerm, fateHandBack:
		return true
	}
	return false
}

// situation is what is known of a read's delivery when its fate is
// decided: the read and its record before the call, and what the call and
// the engine's view said after it.
type situation struct {
	// decided is a fate on record, an earlier delivery's (perhaps another
	// replica's): only its dead-letter copy is missing.
	decided *Decision
	// invalid is why the read did not decode (nil: it did).
	invalid error
	// noMetadata: the message is not a JetStream delivery.
	noMetadata bool
	// attempt is the read's attempt (the calls charged to it on record,
	// plus one); deliveries its delivery count.
	attempt, deliveries uint64
	maxAttempts         uint64
	// creditable: a call that is not charged can be recorded (records are
	// kept, this read's was read, and it has fewer than MaxSheds credits).
	creditable bool

	// called: the call was made, or given up for the stop, and what
	// follows is set.
	called bool
	// failure is the call's failure (nil: a 2xx).
	failure *classify.Error
	// stopped is why the stop cut the call or kept it from being made
	// (nil: it was not): no answer about the read or the engine.
	stopped error
	// outage: the breaker judges the failure the outage's, not the read's.
	outage bool
	// expired: the read is past its age limit (a transient failure only).
	expired bool
	// down: the engine serves no one and fails other reads too (at the
	// read's last attempt only).
	down bool
	// shedding: the engine sheds its load (a shed only): a trial found
	// its sheds fall when the fleet sends less, or it refuses most.
	shedding bool
	// loaded: and a verdict of load stands (not only the engine refusing
	// most).
	loaded bool
	// trying: a trial of the engine runs (a shed only), whose verdict may
	// yet find the shed the engine's load.
	trying bool

	// awaiting is the decision a shed at the read's last attempt would have
	// been, on its record while a trial ran (nil: none); verdict is the
	// engine's verdict that stands now, and trying whether a trial runs:
	// known before the call of a read awaiting one.
	awaiting *Decision
	verdict  engine.Judgement
	// awaitLeft is how long a read may await a trial's verdict: a trial's
	// span (engine.View.TrialSpan) after a shed while it runs, what is left
	// of it since the shed began awaiting before a later call (<= 0: none).
	awaitLeft time.Duration

	// recorded is the decision to dead-letter the read on its record once
	// this delivery wrote its own (nil: not yet): the first one written,
	// perhaps another delivery's, which the copy carries.
	recorded *Decision
	// copied: the copy was tried; copyErr is why it was not confirmed
	// (nil: it was), copyFloor the least delay before it is tried again.
	copied    bool
	copyErr   error
	copyFloor time.Duration

	// lost: the delivery's lease ran out before its fate was carried out.
	lost bool
}

// verdict is a read's fate with what carrying it out needs.
type verdict struct {
	fate fate
	// reason and cause: the dead-letter copy's; cause is also the failure a
	// retry or a hand-back is logged with.
	reason dlq.Reason
	cause  *classify.Error
	// own: the failure is this delivery's, counted once in failures_total
	// (false for a decision on record: counted when it was made).
	own bool
	// backoff is the attempt a retry's delay is drawn for, floor the least
	// delay (the engine's Retry-After).
	backoff uint64
	floor   time.Duration
	// uncharged, when set, is why the attempt is not charged to the read
	// (meter_consumer_uncharged_failures_total{why}); credit: the attempt is
	// recorded as a shed before the NAK, so that its next delivery does not
	// count it.
	uncharged string
	credit    bool
	// await: the credited shed is the read's last attempt's, its
	// dead-letter decision recorded beside the credit for the verdict of
	// the trial that runs (Record.Awaiting).
	await bool
	// within, when set, caps the retry's delay (not its Retry-After floor):
	// a read held for a verdict is held no longer than the trial may take.
	within time.Duration
	// gated: the retry waits for the retry budget when it is due (a read's
	// retry of its call; not a copy's).
	gated bool
	// copyErr is why the dead-letter copy was not confirmed (a retry of the
	// copy only).
	copyErr error
}

// engines reports a retry whose delay grew with the engine's state, not
// with the read's own failures: its failure credited to the engine, not
// awaiting a trial's verdict, and no Retry-After. Held, it is due sooner
// once the engine is back (retries.back).
func (v verdict) engines() bool { return v.credit && !v.await && v.floor == 0 }

// awaited is the fate of a read whose last shed awaits a trial's verdict
// (Record.Awaiting), before any call.
func awaited(s situation) verdict {
	inBudget := s.attempt <= s.maxAttempts // not past the deliveries that may reach no call
	switch {
	case inBudget && s.verdict == engine.Load:
		// The trial found the engine's sheds its load: the last shed was
		// the engine's state, credited as the ones before it: called again.
		return verdict{fate: fateCall}
	case inBudget && s.verdict == engine.Undecided && s.trying && s.awaitLeft > 0:
		// Still tried: held again, without a call, for the verdict, no
		// longer than the trial may take.
		return verdict{fate: fateRetry, cause: s.awaiting.classified(), backoff: s.deliveries, within: s.awaitLeft}
	}
	// The reads' own, no verdict, a trial's span awaited, or held past the
	// deliveries that may reach no call: the shed was the read's last
	// attempt.
	return verdict{fate: fateDeadLetter, reason: s.awaiting.Reason, cause: s.awaiting.classified()}
}

// decide is a read's fate, from its situation alone: docs/SETTLEMENT.md's
// table, row by row (TestSettlementTable).
func decide(s situation) verdict {
	switch {
	case s.noMetadata:
		return verdict{fate: fateReject}
	case s.lost:
		return verdict{fate: fateDrop}
	case s.copied && s.copyErr != nil:
		// Not confirmed: the original is not let go. Held with a delay that
		// grows with its deliveries and is never below half its ceiling, so
		// that a copy refused for good is retried slowly, never in a tight
		// loop; its next delivery comes straight back to the copy.
		return verdict{fate: fateRetry, reason: s.recorded.Reason, cause: s.recorded.classified(),
			backoff: s.deliveries, floor: s.copyFloor, copyErr: s.copyErr}
	case s.copied:
		return verdict{fate: fateTerm, reason: s.recorded.Reason, cause: s.recorded.classified()}
	case s.recorded != nil:
		// The decision on record is the copy's, this delivery's or one
		// written first by another.
		return verdict{fate: fateCopy, reason: s.recorded.Reason, cause: s.recorded.classified()}
	}
	if !s.called {
		switch {
		case s.decided != nil:
			return verdict{fate: fateDeadLetter, reason: s.decided.Reason, cause: s.decided.classified()}
		case s.invalid != nil:
			return verdict{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: classify.Of(s.invalid), own: true}
		case s.awaiting != nil:
			return awaited(s)
		case s.attempt > s.maxAttempts:
			return verdict{fate: fateDeadLetter, reason: dlq.ReasonExhausted, own: true, cause: classify.NewTransient(classify.CauseUnsettled, fmt.Errorf(
				"attempt %d (delivery %d) is past the attempt limit of %d: its calls on record spent them, or too many deliveries reached no call",
				s.attempt, s.deliveries, s.maxAttempts))}
		}
		return verdict{fate: fateCall}
	}
	ce := s.failure
	last := s.attempt >= s.maxAttempts
	switch {
	case s.stopped != nil:
		return verdict{fate: fateHandBack, cause: classify.NewTransient(classify.CauseShutdown, s.stopped), own: true}
	case ce == nil:
		return verdict{fate: fateAck}
	case s.outage && !s.expired:
		// The engine fails as a whole: wait for the breaker, uncharged.
		return verdict{fate: fateCall, cause: ce, own: true, uncharged: whyBreaker}
	case ce.Class == classify.Permanent:
		return verdict{fate: fateDeadLetter, reason: dlq.ReasonPermanent, cause: ce, own: true}
	case s.expired:
		return verdict{fate: fateDeadLetter, reason: dlq.ReasonExpired, cause: ce, own: true}
	case last && s.down && s.creditable:
		// The engine serves no one and fails other reads too: the last
		// failure is the outage's, not the read's, though the breaker may
		// not have seen enough fresh reads to open yet. Credited as a shed;
		// its delay grows with its deliveries.
		return verdict{fate: fateRetry, cause: ce, own: true, backoff: s.deliveries, floor: ce.RetryAfter,
			uncharged: whyDown, credit: true, gated: true}
	case last && overload(ce.Cause) && s.loaded && s.creditable:
		// A trial found the engine's sheds its fleet's load: the last shed
		// is the engine's state too, as the ones before it were.
		return verdict{fate: fateRetry, cause: ce, own: true, backoff: s.deliveries, floor: ce.RetryAfter,
			uncharged: whyShedding, credit: true, gated: true}
	case last && overload(ce.Cause) && s.trying && s.awaitLeft > 0 && s.creditable:
		// A trial runs: the shed may yet be found the engine's load (a
		// fleet's start overruns an engine before any verdict). Credited
		// and held, its dead-letter decision on record: the next delivery
		// decides by the verdict, and calls again only on one of load.
		return verdict{fate: fateRetry, cause: ce, own: true, backoff: s.deliveries, floor: ce.RetryAfter,
			uncharged: whyTrial, credit: true, await: true, within: s.awaitLeft, gated: true}
	case last:
		return verdict{fate: fateDeadLetter, reason: dlq.ReasonExhausted, cause: ce, own: true}
	case overload(ce.Cause) && s.shedding && s.creditable:
		// The engine sheds its load: the shed is the engine's state, not the
		// read's. Credited as a shed; its delay grows with its deliveries.
		return verdict{fate: fateRetry, cause: ce, own: true, backoff: s.deliveries, floor: ce.RetryAfter,
			uncharged: whyShedding, credit: true, gated: true}
	}
	return verdict{fate: fateRetry, cause: ce, own: true, backoff: s.attempt, floor: ce.RetryAfter, gated: true}
}
