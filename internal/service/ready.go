package service

import (
	"sync"
)

// readiness is what /readyz says: not ready, with the reason, until the
// service consumes; then ready while it does and the connection is up.
type readiness struct {
	mu      sync.Mutex
	reason  string
	refusal string                // the last permission NATS refused, while not ready
	ready   func() (bool, string) // set once consuming
}

// refused notes a permission NATS refused (an async error), which /readyz
// shows beside the reason until the service is ready.
func (r *readiness) refused(err error) {
	r.mu.Lock()
	r.refusal = err.Error()
	r.mu.Unlock()
}

// set states why the service is not ready yet.
func (r *readiness) set(reason string) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

// consuming hands readiness over to check, which the running service
// answers.
func (r *readiness) consuming(check func() (bool, string)) {
	r.mu.Lock()
	r.ready = check
	r.mu.Unlock()
}

// get is the readiness /readyz serves.
func (r *readiness) get() (bool, string) {
	r.mu.Lock()
	reason, refusal, ready := r.reason, r.refusal, r.ready
	r.mu.Unlock()
	if ready == nil {
		if refusal != "" {
			reason += "; NATS refused a permission: " + refusal
		}
		return false, reason
	}
	return ready()
}
