package service

import (
	"sync"
)

// Why a replica is not consuming: the closed set of values of the label
// reason of meter_consumer_not_consuming.
const (
	WhyStarting     = "starting"     // the process has not tried NATS yet
	WhyConnecting   = "connecting"   // NATS does not answer (unreachable, egress blocked, down)
	WhyRefused      = "refused"      // NATS refused the connection (credentials, account, certificate)
	WhyStreams      = "streams"      // a stream, the records bucket or the durable is missing or not readable
	WhyDisconnected = "disconnected" // was consuming; the connection is lost and being re-established
	WhyPaused       = "paused"       // the durable is paused: the server delivers nothing until the pause ends
	WhyStopped      = "stopped"      // connected, but the pipeline does not consume (stopping, or it ended)
)

// Reasons returns every reason a replica may give for not consuming.
func Reasons() []string {
	return []string{WhyStarting, WhyConnecting, WhyRefused, WhyStreams, WhyDisconnected, WhyPaused, WhyStopped}
}

// readiness is what /readyz says and what meter_consumer_consuming
// exports: not ready, with the reason, until the service consumes; then
// ready while it does and the connection is up.
type readiness struct {
	mu      sync.Mutex
	why     string                // one of Reasons, while not consuming yet
	reason  string                // the text /readyz shows
	refusal string                // the last permission NATS refused, while not ready
	ready   func() (bool, string) // set once consuming
	whyFunc func() string         // set once consuming: why it is not ready (one of Reasons)
}

func newReadiness() *readiness { return &readiness{why: WhyStarting, reason: "starting"} }

// refused notes a permission NATS refused (an async error), which /readyz
// shows beside the reason until the service is ready.
func (r *readiness) refused(err error) {
	r.mu.Lock()
	r.refusal = err.Error()
	r.mu.Unlock()
}

// set states why the service is not ready yet: why is one of Reasons,
// reason the text for a person.
func (r *readiness) set(why, reason string) {
	r.mu.Lock()
	r.why, r.reason = why, reason
	r.mu.Unlock()
}

// consuming hands readiness over to check, which the running service
// answers.
func (r *readiness) consuming(check func() (bool, string)) {
	r.mu.Lock()
	r.ready = check
	r.mu.Unlock()
}

// whyNot hands the reason over to why, which the running service answers
// (one of Reasons) when check says it is not ready; WhyStopped without it.
func (r *readiness) whyNot(why func() string) {
	r.mu.Lock()
	r.whyFunc = why
	r.mu.Unlock()
}

// state is whether the replica consumes and, when not, why (one of
// Reasons) and the text /readyz serves.
func (r *readiness) state() (ok bool, why, reason string) {
	r.mu.Lock()
	why, reason, refusal, ready, whyFunc := r.why, r.reason, r.refusal, r.ready, r.whyFunc
	r.mu.Unlock()
	if ready == nil {
		if refusal != "" {
			reason += "; NATS refused a permission: " + refusal
		}
		return false, why, reason
	}
	ok, reason = ready()
	switch {
	case ok:
		return true, "", reason
	case whyFunc != nil:
		return false, whyFunc(), reason
	}
	return false, WhyStopped, reason
}

// get is the readiness /readyz serves.
func (r *readiness) get() (bool, string) {
	ok, _, reason := r.state()
	return ok, reason
}
