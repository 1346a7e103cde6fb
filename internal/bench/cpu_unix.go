//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time of this process so far
// (getrusage RUSAGE_SELF): every goroutine, the in-process server's included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
