// Package clock separates the two clocks a process reads.
//
// The wall clock (Now) is the time of day: use it for a timestamp that is
// written down or compared with another machine's clock (a stream
// timestamp, a record another replica reads). It can step, backwards or
// forwards: NTP, an operator, a virtual machine resumed.
//
// The monotonic clock (Mono) never steps: use it for every interval this
// process measures (a sliding window, a timeout, a rate). A reading is the
// time since the clock's origin; only the difference of two readings of one
// Clock means anything.
//
// System is the process's clock; Fake is a manual one whose wall clock can
// be stepped apart from its monotonic clock, and Stepping the system clock
// whose wall clock can be stepped, for tests. All are safe for
// concurrent use.
package clock
