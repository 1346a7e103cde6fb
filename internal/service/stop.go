package service

import (
	"time"

	"github.com/meterline/meter-consumer/internal/stream"
)

// HTTPStopTimeout bounds the stop of the HTTP server (/metrics, /healthz,
// /readyz), the last step of a stop: a scrape in flight may finish.
const HTTPStopTimeout = 5 * time.Second

// MaxStop is the longest a graceful stop of Run takes, from the end of
// its context to its return, with shutdown.timeout set to shutdown. Its
// steps run one after the other:
//
//   - shutdown: in-flight reads finish and are settled;
//   - stream.HandBackGrace: past it, the reads still held (parked, waiting
//     out a retry, cut in flight, left in the client buffer) are handed back
//     with their records; a hand-back not recorded by then is NAKed
//     unrecorded;
//   - DrainTimeout: the connection drains, which flushes every settlement;
//   - HTTPStopTimeout: the HTTP server stops.
//
// The stop of an embedded server (a newcomer's machine, the demo) is not
// counted: a deployment runs on a real one.
//
// A pod's terminationGracePeriodSeconds must be longer (deploy/kubernetes):
// SIGKILL inside the budget cuts the hand-backs short, and their reads come
// back only after the ack wait, each with one attempt spent.
func MaxStop(shutdown time.Duration) time.Duration {
	return shutdown + stream.HandBackGrace + DrainTimeout + HTTPStopTimeout
}
